"""VERDICT: fail fields,turns,tokensUsed,version,task,messages,pendingToolUse

c03's Checkpoint class with NamedTemporaryFile left in the system temp folder (no dir=): /tmp is
another file system from the checkpoint folder (as on a usual machine, and in the grader's box), so
os.replace fails with EXDEV at the first save and no crash gets as far as a checkpoint.
"""
import json
import os
import tempfile


class CheckpointError(Exception):
    """Cannot resume from this file."""


class UnsupportedVersion(CheckpointError):
    """Unknown protocol version."""


class Checkpoint:
    KEYS = ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")

    def __init__(self, directory):
        self.directory = directory
        self.path = os.path.join(directory, "checkpoint.json")

    def write(self, state):
        os.makedirs(self.directory, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", delete=False, suffix=".tmp",
                                         encoding="utf-8") as f:
            json.dump({k: state[k] for k in self.KEYS}, f)
        os.replace(f.name, self.path)

    def read(self):
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as exc:
            raise CheckpointError(str(exc)) from exc
        if not isinstance(data, dict):
            raise CheckpointError("expected an object")
        if type(data.get("version")) is not int or data["version"] != 1:  # true and 1.0 are not 1
            raise UnsupportedVersion(repr(data.get("version")))
        missing = set(self.KEYS) - set(data)
        if missing:
            raise CheckpointError("missing " + ", ".join(sorted(missing)))
        return data


def save_checkpoint(state, directory="checkpoints"):
    Checkpoint(directory).write(state)


def load_checkpoint(directory="checkpoints"):
    return Checkpoint(directory).read()
