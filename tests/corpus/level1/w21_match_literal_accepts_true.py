"""VERDICT: fail load-version

Matches the version with the literal pattern `{"version": 1}`: a literal pattern compares with ==, so
JSON `true` and `1.0` match it and load as version 1.
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
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump({k: state[k] for k in FIELDS}, f)
    os.replace(path + ".tmp", path)


def load_checkpoint(directory="checkpoints"):
    path = os.path.join(directory, "checkpoint.json")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise CheckpointError(str(exc)) from exc
    match data:
        case {"version": 1, **rest} if set(FIELDS) <= {"version", *rest}:
            return data
        case {"version": 1}:
            raise CheckpointError(f"{path} is missing a field")
        case dict():
            raise UnsupportedVersion(f"{path}: version {data.get('version')!r}")
        case _:
            raise CheckpointError(f"{path} is not a JSON object")
