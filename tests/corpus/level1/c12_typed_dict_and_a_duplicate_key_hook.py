"""VERDICT: pass

Reasoning first. The save builds the record with operator.itemgetter over the six names, so exactly
those keys reach the file with the state's values and the runtime keys (`client`, `startedAt`) stay
behind; the state itself is not touched. The temp file sits beside the checkpoint and is renamed over
it. The loader parses with an object_pairs_hook that refuses a key given twice (a second writer's
leftovers), checks that the result is a dict, then the version (exactly the int 1: `type(...) is int`
refuses true, and 1.0 is a float), then the six keys, and returns the dict json built. Not UTF-8 and
not JSON both raise ValueError subclasses, which become CheckpointError. Every level-1 check holds.
"""

from __future__ import annotations

import json
import operator
import os
from typing import Any, Optional, TypedDict

FIELDS = ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")
_pick = operator.itemgetter(*FIELDS)


class Record(TypedDict):
    version: int
    task: str
    turns: int
    tokensUsed: int
    messages: list[dict[str, Any]]
    pendingToolUse: Optional[dict[str, Any]]


class CheckpointError(Exception):
    pass


class UnsupportedVersion(CheckpointError):
    pass


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise CheckpointError(f"the key {key!r} appears twice")
        seen[key] = value
    return seen


def save_checkpoint(state: dict[str, Any], directory: str = "checkpoints") -> None:
    record: Record = dict(zip(FIELDS, _pick(state)))  # type: ignore[assignment]
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, "checkpoint.json")
    with open(final + ".new", "w", encoding="utf-8") as f:
        json.dump(record, f)
    os.replace(final + ".new", final)


def load_checkpoint(directory: str = "checkpoints") -> Record:
    path = os.path.join(directory, "checkpoint.json")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f, object_pairs_hook=_no_repeats)
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path} cannot be read as JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} holds {type(data).__name__}, not an object")
    version = data.get("version")
    if type(version) is not int or version != 1:
        raise UnsupportedVersion(f"{path}: version {version!r} is not 1")
    absent = [name for name in FIELDS if name not in data]
    if absent:
        raise CheckpointError(f"{path} lacks {absent}")
    return data  # type: ignore[return-value]
