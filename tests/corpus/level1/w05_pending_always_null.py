"""VERDICT: fail fields,pendingToolUse,load-version

Writes `pendingToolUse: None` whatever the state says ("it is only for lesson 3"), so a crash mid-tool
leaves no mark on disk.
"""
import json
import os


class CheckpointError(Exception):
    pass


class UnsupportedVersion(CheckpointError):
    pass


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    record = {"version": 1, "task": state["task"], "turns": state["turns"], "tokensUsed": state["tokensUsed"],
              "messages": state["messages"], "pendingToolUse": None}
    with open(os.path.join(directory, "checkpoint.json.tmp"), "w", encoding="utf-8") as f:
        json.dump(record, f)
    os.replace(os.path.join(directory, "checkpoint.json.tmp"), os.path.join(directory, "checkpoint.json"))


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
