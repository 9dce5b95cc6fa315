"""VERDICT: fail load-version

Checks the fields first and the version second: a newer format with renamed fields gets "missing
field" instead of UnsupportedVersion, so the caller cannot tell damage from a format it does not know.
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
    with open(os.path.join(directory, "checkpoint.json"), "w", encoding="utf-8") as f:
        json.dump({k: state[k] for k in FIELDS}, f)


def load_checkpoint(directory="checkpoints"):
    try:
        with open(os.path.join(directory, "checkpoint.json"), encoding="utf-8") as f:
            data = json.load(f)
    except ValueError as exc:
        raise CheckpointError("damaged") from exc
    if not isinstance(data, dict):
        raise CheckpointError("not an object")
    for key in FIELDS[1:]:
        if key not in data:
            raise CheckpointError(f"missing {key}")
    if data.get("version") != 1:
        raise UnsupportedVersion(data.get("version"))
    return data
