"""VERDICT: fail fields,tokensUsed,load-accepts

Writes the spend as `tokens_used`, the Python spelling, and its loader checks for that same name, so
its own files load; but the file is not the protocol's, and the resume, which reads `tokensUsed`,
finds no spend in it.
"""

import json
import os

KEYS = {"version": "version", "task": "task", "turns": "turns", "tokensUsed": "tokens_used",
        "messages": "messages", "pendingToolUse": "pendingToolUse"}


class CheckpointError(Exception):
    pass


class UnsupportedVersion(CheckpointError):
    pass


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump({ours: state[theirs] for theirs, ours in KEYS.items()}, f)
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
    if type(data.get("version")) is not int or data["version"] != 1:
        raise UnsupportedVersion(f"{path}: version {data.get('version')!r}")
    missing = [k for k in KEYS.values() if k not in data]
    if missing:
        raise CheckpointError(f"{path} is missing {missing}")
    return data
