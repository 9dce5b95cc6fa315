"""VERDICT: fail fields,turns,tokensUsed,version,task,messages,pendingToolUse,load-version

Saves `version` as the string "1"; its own strict loader then refuses every file it wrote, so no
resume can start at all.
"""
import json
import os

FIELDS = ("task", "turns", "tokensUsed", "messages", "pendingToolUse")


class CheckpointError(Exception):
    pass


class UnsupportedVersion(CheckpointError):
    pass


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    record = {"version": "1", **{k: state[k] for k in FIELDS}}
    with open(os.path.join(directory, "checkpoint.json"), "w", encoding="utf-8") as f:
        json.dump(record, f)


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
    for key in FIELDS:
        if key not in data:
            raise CheckpointError(key)
    return data
