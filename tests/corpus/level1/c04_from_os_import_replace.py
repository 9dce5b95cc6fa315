"""VERDICT: pass

Names imported with `from os import ...`, json.dumps to bytes, a module-level tuple of fields.
"""
import json
from os import makedirs, replace
from os.path import join

FIELDS = ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")


class CheckpointError(Exception):
    pass


class UnsupportedVersion(CheckpointError):
    pass


def save_checkpoint(state, directory="checkpoints"):
    makedirs(directory, exist_ok=True)
    data = json.dumps({name: state[name] for name in FIELDS}, separators=(",", ":")).encode("utf-8")
    with open(join(directory, "checkpoint.json.tmp"), "wb") as f:
        f.write(data)
    replace(join(directory, "checkpoint.json.tmp"), join(directory, "checkpoint.json"))


def load_checkpoint(directory="checkpoints"):
    try:
        with open(join(directory, "checkpoint.json"), "rb") as f:
            data = json.load(f)
    except json.JSONDecodeError as exc:
        raise CheckpointError("unreadable checkpoint") from exc
    if not isinstance(data, dict):
        raise CheckpointError("checkpoint is not an object")
    if type(data.get("version")) is not int or data.get("version") != 1:  # true and 1.0 are not 1
        raise UnsupportedVersion(data.get("version"))
    if not all(name in data for name in FIELDS):
        raise CheckpointError("checkpoint is missing a field")
    return data
