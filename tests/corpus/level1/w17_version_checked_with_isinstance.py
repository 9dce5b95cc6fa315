"""VERDICT: fail load-version

Checks the version with isinstance(version, int): bool is a subclass of int, so a file whose version
is JSON `true` loads as version 1.
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
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} is not an object")
    version = data.get("version")
    if not isinstance(version, int) or version != 1:
        raise UnsupportedVersion(f"{path} has version {version!r}")
    missing = [k for k in FIELDS if k not in data]
    if missing:
        raise CheckpointError(f"{path} lacks {missing}")
    return data
