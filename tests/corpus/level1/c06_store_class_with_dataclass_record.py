"""VERDICT: pass

A small store class over a dataclass record: dataclasses.asdict picks the six fields, a
NamedTemporaryFile(delete=False) in the folder is renamed into place, and the loader rebuilds the
record (a TypeError from missing or extra keys becomes a CheckpointError).
"""
import dataclasses
import json
import os
import tempfile
from typing import Optional


class CheckpointError(Exception):
    pass


class UnsupportedVersion(CheckpointError):
    pass


@dataclasses.dataclass
class Record:
    version: int
    task: str
    turns: int
    tokensUsed: int
    messages: list
    pendingToolUse: Optional[dict]


class Store:
    def __init__(self, directory):
        self.directory = directory
        self.path = os.path.join(directory, "checkpoint.json")

    def save(self, state):
        names = [f.name for f in dataclasses.fields(Record)]
        record = Record(**{name: state[name] for name in names})
        os.makedirs(self.directory, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=self.directory, delete=False, suffix=".json") as f:
            json.dump(dataclasses.asdict(record), f, ensure_ascii=False)
        os.replace(f.name, self.path)

    def load(self):
        try:
            with open(self.path, encoding="utf-8") as f:
                raw = json.load(f)
        except OSError as exc:
            raise CheckpointError(f"cannot read {self.path}: {exc}") from exc
        except ValueError as exc:
            raise CheckpointError(f"{self.path} is torn or not JSON: {exc}") from exc
        if not isinstance(raw, dict):
            raise CheckpointError(f"{self.path} holds no object")
        if raw.get("version") is True or raw.get("version") != 1 or not isinstance(raw.get("version"), int):
            raise UnsupportedVersion(f"{self.path}: unknown version {raw.get('version')!r}")
        try:
            record = Record(**raw)
        except TypeError as exc:
            raise CheckpointError(f"{self.path} does not hold exactly the six fields: {exc}") from exc
        return dataclasses.asdict(record)


def save_checkpoint(state, directory="checkpoints"):
    Store(directory).save(state)


def load_checkpoint(directory="checkpoints"):
    return Store(directory).load()
