"""VERDICT: pass

pathlib throughout, the record built field by field, checks in the lesson's order.
"""
import json
from pathlib import Path


class CheckpointError(Exception):
    pass


class UnsupportedVersion(CheckpointError):
    pass


def save_checkpoint(state, directory="checkpoints"):
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    record = {
        "version": state["version"],
        "task": state["task"],
        "turns": state["turns"],
        "tokensUsed": state["tokensUsed"],
        "messages": state["messages"],
        "pendingToolUse": state["pendingToolUse"],
    }
    tmp = folder / "checkpoint.json.tmp"
    tmp.write_text(json.dumps(record), encoding="utf-8")
    tmp.replace(folder / "checkpoint.json")


def load_checkpoint(directory="checkpoints"):
    try:
        data = json.loads((Path(directory) / "checkpoint.json").read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise CheckpointError("not a JSON object")
    if type(data.get("version")) is not int or data.get("version") != 1:  # true and 1.0 are not 1
        raise UnsupportedVersion(f"version {data.get('version')!r}")
    for key in ("task", "turns", "tokensUsed", "messages", "pendingToolUse"):
        if key not in data:
            raise CheckpointError(f"missing {key}")
    return data
