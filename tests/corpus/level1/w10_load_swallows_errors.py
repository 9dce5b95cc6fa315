"""VERDICT: fail version,load-version,load-shape

A loader that catches every exception and returns None "so resume can start fresh": the refusals
never reach the caller, and resume falls over on a None instead.
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
        if data.get("version") != 1:
            raise UnsupportedVersion(data.get("version"))
        for key in FIELDS:
            if key not in data:
                raise CheckpointError(key)
        return data
    except Exception:
        return None
