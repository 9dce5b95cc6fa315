"""VERDICT: pass

Saves with os.open, os.write in a loop and os.replace (keys sorted, indented); loads through pathlib
with one isinstance check per field, and treats bool as what it is (not an int).
"""
import json
import os
from pathlib import Path

FIELDS = ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")
KINDS = {"version": int, "task": str, "turns": int, "tokensUsed": int, "messages": list, "pendingToolUse": (dict, type(None))}


class CheckpointError(Exception):
    pass


class UnsupportedVersion(CheckpointError):
    pass


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    data = json.dumps({k: state[k] for k in FIELDS}, indent=4, sort_keys=True).encode()
    tmp = os.path.join(directory, f"checkpoint.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    os.replace(tmp, os.path.join(directory, "checkpoint.json"))


def load_checkpoint(directory="checkpoints"):
    path = Path(directory) / "checkpoint.json"
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError as exc:
        raise CheckpointError(f"nothing to resume: {path} does not exist") from exc
    except ValueError as exc:
        raise CheckpointError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} is not a JSON object")
    if type(data.get("version")) is not int or data["version"] != 1:
        raise UnsupportedVersion(f"{path}: version {data.get('version')!r} is not 1")
    for key, kind in KINDS.items():
        if key not in data:
            raise CheckpointError(f"{path} lacks {key}")
        if isinstance(data[key], bool) or not isinstance(data[key], kind):
            raise CheckpointError(f"{path}: {key} has the wrong type")
    return {k: data[k] for k in FIELDS}
