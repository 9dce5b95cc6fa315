"""VERDICT: fail load-version

Refuses a version only when it is newer (`data["version"] > 1`), thinking of forward compatibility: a
file with no version ends in KeyError, a version of 0 or `true` loads, and a version written as a
string ends in TypeError, none of them the UnsupportedVersion resume can catch.
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
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} is not a JSON object")
    if data["version"] > 1:
        raise UnsupportedVersion(f"{path} was written by a newer version ({data['version']})")
    missing = [k for k in FIELDS if k not in data]
    if missing:
        raise CheckpointError(f"{path} is missing {missing}")
    return data
