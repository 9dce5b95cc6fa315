"""VERDICT: fail fields,turns,tokensUsed,version,task,messages,pendingToolUse,load-version

Always writes to ./checkpoints, whatever `directory` it is given, so resume finds nothing where it looks.
"""
import json
import os

FIELDS = ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")


class CheckpointError(Exception):
    pass


class UnsupportedVersion(CheckpointError):
    pass


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs("checkpoints", exist_ok=True)
    with open(os.path.join("checkpoints", "checkpoint.json"), "w", encoding="utf-8") as f:
        json.dump({k: state[k] for k in FIELDS}, f)


def load_checkpoint(directory="checkpoints"):
    try:
        with open(os.path.join(directory, "checkpoint.json"), encoding="utf-8") as f:
            data = json.load(f)
    except ValueError as exc:
        raise CheckpointError("damaged") from exc
    if not isinstance(data, dict):
        raise CheckpointError("not an object")
    if data.get("version") != 1:
        raise UnsupportedVersion(data.get("version"))
    for key in FIELDS[1:]:
        if key not in data:
            raise CheckpointError(key)
    return data
