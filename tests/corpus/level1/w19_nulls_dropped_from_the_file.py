"""VERDICT: fail fields,turns,tokensUsed,version,task,messages

Leaves out every field whose value is None ("no need to store nulls"): at save point B and at the
end the file has no pendingToolUse, and the loader, which refuses a file missing a field, refuses
the file its own save wrote. A crash while a tool runs still resumes (pendingToolUse is set then).
"""

import json
import os

FIELDS = ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")


class CheckpointError(Exception):
    pass


class UnsupportedVersion(CheckpointError):
    pass


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    record = {k: state[k] for k in FIELDS if state[k] is not None}
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(record, f)
    os.replace(path + ".tmp", path)


def load_checkpoint(directory="checkpoints"):
    path = os.path.join(directory, "checkpoint.json")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} is not an object")
    version = data.get("version")
    if type(version) is not int or version != 1:
        raise UnsupportedVersion(f"{path} has version {version!r}")
    missing = [k for k in FIELDS if k not in data]
    if missing:
        raise CheckpointError(f"{path} lacks {missing}")
    return data
