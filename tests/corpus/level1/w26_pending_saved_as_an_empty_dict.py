"""VERDICT: fail fields

Reasoning first. The learner wanted `pendingToolUse` to be "always an object", so the save writes
`state["pendingToolUse"] or {}`: at save point A the call is written as it is, but at save point B
and at the end, where the loop holds None, the file holds {}. The protocol says null when nothing
is pending; {} is neither null nor a call (no id, name or input). The file no longer holds the
state's values (fails "exactly the six fields"). A resume that asks `is not None` would take {} for
a call to answer; the kit's reference resume asks for a truthy value, so the per-field resumes go on.
"""

import json
import os

FIELDS = ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")


class CheckpointError(Exception):
    pass


class UnsupportedVersion(CheckpointError):
    pass


def save_checkpoint(state, directory="checkpoints"):
    record = {key: state[key] for key in FIELDS}
    record["pendingToolUse"] = state["pendingToolUse"] or {}
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(record, f)
    os.replace(path + ".tmp", path)


def load_checkpoint(directory="checkpoints"):
    path = os.path.join(directory, "checkpoint.json")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"cannot load {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} does not hold an object")
    if type(data.get("version")) is not int or data["version"] != 1:
        raise UnsupportedVersion(f"{path}: unknown version {data.get('version')!r}")
    for key in FIELDS:
        if key not in data:
            raise CheckpointError(f"{path}: no {key}")
    return data
