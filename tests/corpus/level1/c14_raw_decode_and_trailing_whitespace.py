"""VERDICT: pass

Reasoning first. The loader uses json.JSONDecoder().raw_decode, which stops after the first value,
and then insists that only whitespace follows it, so a file with two documents or trailing rubbish
is refused like any torn file (raw_decode raises JSONDecodeError on an empty or cut file; the text is
read with errors="strict", so bytes that are not UTF-8 raise UnicodeDecodeError; both are
ValueErrors and become CheckpointError). The version is read before any other field and must be the
int 1 (bool is excluded before the comparison). The save writes the six fields, two-space indented,
through os.open with O_CREAT|O_TRUNC on a temp name, then os.rename (Linux: replaces the old file).
"""

import json
import os

FIELDS = ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")
_decoder = json.JSONDecoder()


class CheckpointError(Exception):
    pass


class UnsupportedVersion(CheckpointError):
    pass


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    body = json.dumps({k: state[k] for k in FIELDS}, indent=2).encode("utf-8")
    temp = os.path.join(directory, ".checkpoint.json.writing")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    os.rename(temp, os.path.join(directory, "checkpoint.json"))


def load_checkpoint(directory="checkpoints"):
    path = os.path.join(directory, "checkpoint.json")
    try:
        with open(path, encoding="utf-8", errors="strict") as f:
            text = f.read()
        data, end = _decoder.raw_decode(text.lstrip())
        if text.lstrip()[end:].strip():
            raise ValueError("something follows the JSON document")
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path} is not one JSON document: {exc}") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} is a JSON {type(data).__name__}")
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version != 1:
        raise UnsupportedVersion(f"{path} has version {version!r}, and only 1 is known")
    missing = set(FIELDS) - data.keys()
    if missing:
        raise CheckpointError(f"{path} is missing {', '.join(sorted(missing))}")
    return data
