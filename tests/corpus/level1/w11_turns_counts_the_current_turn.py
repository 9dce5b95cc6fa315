"""VERDICT: fail fields,turns,load-version

Saves `turns + 1` ("the turn we are in"), so resume thinks one more turn has run than really has and
the cap fires a turn early.
"""
import json
import os
from pathlib import Path


class CheckpointError(Exception):
    pass


class UnsupportedVersion(CheckpointError):
    pass


def save_checkpoint(state, directory="checkpoints"):
    Path(directory).mkdir(parents=True, exist_ok=True)
    record = {"version": 1, "task": state["task"], "turns": state["turns"] + 1,
              "tokensUsed": state["tokensUsed"], "messages": state["messages"],
              "pendingToolUse": state["pendingToolUse"]}
    Path(directory, "checkpoint.json").write_text(json.dumps(record), encoding="utf-8")


def load_checkpoint(directory="checkpoints"):
    try:
        data = json.loads(Path(directory, "checkpoint.json").read_text(encoding="utf-8"))
    except ValueError as exc:
        raise CheckpointError("damaged") from exc
    if not isinstance(data, dict):
        raise CheckpointError("not an object")
    if data.get("version") != 1:
        raise UnsupportedVersion(data.get("version"))
    missing = [k for k in ("task", "turns", "tokensUsed", "messages", "pendingToolUse") if k not in data]
    if missing:
        raise CheckpointError(", ".join(missing))
    return data
