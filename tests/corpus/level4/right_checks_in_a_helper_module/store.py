"""The learner's own helper: reading and writing checkpoint.json, and the error for a file not to trust."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

FIELDS = ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")


class CheckpointError(Exception):
    """The checkpoint cannot be trusted: missing, torn, malformed, or from another version."""


class UnsupportedVersion(CheckpointError):
    """A version this code does not read."""


def write(state: dict[str, Any], directory: str) -> None:
    path = Path(directory) / "checkpoint.json"
    temp = path.with_suffix(".json.tmp")
    with temp.open("w", encoding="utf-8") as f:
        json.dump({key: state[key] for key in FIELDS}, f)
        f.flush()
        os.fsync(f.fileno())
    temp.replace(path)


def read(directory: str) -> dict[str, Any]:
    path = Path(directory) / "checkpoint.json"
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"there is no checkpoint at {path}; start the task with run_agent") from None
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path} cannot be read: {exc}") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} holds a JSON {type(data).__name__}")
    version = data.get("version")
    if type(version) is not int or version != 1:
        raise UnsupportedVersion(f"{path} is version {version!r}; this code reads version 1")
    for key, kind in (("task", str), ("turns", int), ("tokensUsed", int), ("messages", list)):
        if key not in data or type(data[key]) is not kind:
            raise CheckpointError(f"{path}: `{key}` is missing or not a {kind.__name__}")
    pending = data.get("pendingToolUse", ...)
    if pending is ... or not (pending is None or isinstance(pending, dict)):
        raise CheckpointError(f"{path}: `pendingToolUse` is missing or not an object or null")
    if not data["messages"] or not all(isinstance(m, dict) for m in data["messages"]):
        raise CheckpointError(f"{path}: `messages` is empty or not a list of messages")
    return {key: data[key] for key in FIELDS}
