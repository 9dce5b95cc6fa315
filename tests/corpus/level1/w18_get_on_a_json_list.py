"""VERDICT: fail load-shape

Reads the version with data.get(...) before checking that the JSON is an object: a file holding a
JSON list makes load raise AttributeError, not CheckpointError.
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
        raise CheckpointError(f"cannot read {path}: {exc}") from exc
    version = data.get("version")
    if type(version) is not int or version != 1:
        raise UnsupportedVersion(f"{path} has version {version!r}")
    missing = [k for k in FIELDS if k not in data]
    if missing:
        raise CheckpointError(f"{path} lacks {missing}")
    return data
