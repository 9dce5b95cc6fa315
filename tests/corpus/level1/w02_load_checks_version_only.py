"""VERDICT: fail load-shape,load-version

Six fields saved; the loader checks the version and nothing else, so a list or a torn file escapes
as AttributeError or JSONDecodeError, and a missing field loads.
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
    with open(os.path.join(directory, "checkpoint.json"), encoding="utf-8") as f:
        data = json.load(f)
    if data.get("version") != 1:
        raise UnsupportedVersion(data.get("version"))
    return data
