"""VERDICT: fail fields,tokensUsed,version,load-version,load-shape

Forgets tokensUsed, and the loader trusts anything: resume restarts the spend at zero.
"""
import json
import os


class CheckpointError(Exception):
    pass


class UnsupportedVersion(CheckpointError):
    pass


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    record = {"version": 1, "task": state["task"], "turns": state["turns"],
              "messages": state["messages"], "pendingToolUse": state["pendingToolUse"]}
    with open(os.path.join(directory, "checkpoint.json"), "w", encoding="utf-8") as f:
        json.dump(record, f)


def load_checkpoint(directory="checkpoints"):
    with open(os.path.join(directory, "checkpoint.json"), encoding="utf-8") as f:
        return json.load(f)
