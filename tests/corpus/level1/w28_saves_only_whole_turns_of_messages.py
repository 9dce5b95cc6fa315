"""VERDICT: fail fields,pendingToolUse

Reasoning first. The learner wants the file to hold "only whole turns": when a call is pending, the
save writes `messages` without the last assistant message (the one that asks for the call) and
keeps `pendingToolUse`. At save point A the file then names a call whose tool_use block is nowhere
in `messages`: the values differ from the state (fails "exactly the six fields"), and a crash while
the tool runs leaves a file from which resume answers a call the transcript never made: the
tool_result it appends follows a user message, not the assistant turn that asked, and the API
refuses that (fails the pendingToolUse check). Saves at B and at the end are whole.
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
    if record["pendingToolUse"] is not None:
        record["messages"] = record["messages"][:-1]  # the turn is not finished yet
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
