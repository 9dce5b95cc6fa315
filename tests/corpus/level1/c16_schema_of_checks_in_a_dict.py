"""VERDICT: pass

Reasoning first. The loader holds its rules in a dict from field name to a predicate and walks it in
order; the version's rule comes first and is the only one that raises UnsupportedVersion (exactly the
int 1: `type(v) is int`, so true and 1.0 fail it), and a missing version is a missing rule subject, which
is UnsupportedVersion too. The other five rules only ask that the key be there (any value: 0, null and
[] are values). A file that is not a dict, not JSON, or not UTF-8 is CheckpointError. The save takes the
six names from the same dict's keys, so the file holds exactly them, through a temp file and
os.replace.
"""

import json
import os

RULES = {
    "version": lambda v: type(v) is int and v == 1,
    "task": None, "turns": None, "tokensUsed": None, "messages": None, "pendingToolUse": None,
}


class CheckpointError(Exception):
    pass


class UnsupportedVersion(CheckpointError):
    pass


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump({name: state[name] for name in RULES}, f)
    os.replace(path + ".tmp", path)


def load_checkpoint(directory="checkpoints"):
    path = os.path.join(directory, "checkpoint.json")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: {exc}") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} is not a JSON object")
    for name, rule in RULES.items():
        if name not in data:
            raise (UnsupportedVersion if name == "version" else CheckpointError)(f"{path} has no `{name}`")
        if rule is not None and not rule(data[name]):
            raise UnsupportedVersion(f"{path}: `{name}` is {data[name]!r}")
    return data
