"""VERDICT: fail fields,load-version

Gets the file right by deleting the runtime-only keys from the loop's own state, so the running
loop loses its client.
"""
import json
import os


class CheckpointError(Exception):
    pass


class UnsupportedVersion(CheckpointError):
    pass


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    state.pop("client", None)
    state.pop("startedAt", None)
    with open(os.path.join(directory, "checkpoint.json"), "w", encoding="utf-8") as f:
        json.dump(state, f)


def load_checkpoint(directory="checkpoints"):
    try:
        with open(os.path.join(directory, "checkpoint.json"), encoding="utf-8") as f:
            data = json.load(f)
    except ValueError as exc:
        raise CheckpointError("damaged") from exc
    if not isinstance(data, dict):
        raise CheckpointError("not an object")
    if data.get("version") != 1:
        raise UnsupportedVersion(data.get("version"))
    for key in ("task", "turns", "tokensUsed", "messages", "pendingToolUse"):
        if key not in data:
            raise CheckpointError(key)
    return data
