"""VERDICT: fail load-version

Treats a file with no version as version 1 (`data.get("version", 1)`): an unmarked file is a guess.
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
    if data.get("version", 1) != 1:
        raise UnsupportedVersion(data["version"])
    missing = [k for k in FIELDS[1:] if k not in data]
    if missing:
        raise CheckpointError(f"missing {missing}")
    return data
