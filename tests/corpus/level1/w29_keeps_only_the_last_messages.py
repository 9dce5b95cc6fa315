"""VERDICT: fail fields,turns,tokensUsed,task,messages,pendingToolUse

Reasoning first. To keep the file small, the save writes only the last four messages ("the model only
needs recent context"). Up to four messages every file is whole; from turn 2 on (five messages and
more) the file has lost the start of the conversation, the user's task among it. That breaks
"exactly the six fields, with the loop's values". A resume from such a file sends the model a
transcript that begins with an assistant message, or with a tool_result whose tool_use is gone,
and the API refuses both: every level-1 check that resumes after turn 2 (the cap, the budget, the
task, the conversation, the call in flight) finds a resume that cannot go on. Compaction is a real technique, but it belongs to the resumed run, not the checkpoint.
"""

import json
import os

FIELDS = ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")
KEEP = 4


class CheckpointError(Exception):
    pass


class UnsupportedVersion(CheckpointError):
    pass


def save_checkpoint(state, directory="checkpoints"):
    record = {key: state[key] for key in FIELDS}
    record["messages"] = state["messages"][-KEEP:]
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(record, f)
    os.replace(path + ".tmp", path)


def load_checkpoint(directory="checkpoints"):
    path = os.path.join(directory, "checkpoint.json")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"cannot load {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} does not hold an object")
    if type(data.get("version")) is not int or data["version"] != 1:
        raise UnsupportedVersion(f"{path}: unknown version {data.get('version')!r}")
    for key in FIELDS:
        if key not in data:
            raise CheckpointError(f"{path}: no {key}")
    return data
