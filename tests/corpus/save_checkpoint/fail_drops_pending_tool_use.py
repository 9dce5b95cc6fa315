"""VERDICT: fail PAIRING

Atomic and complete in shape, but it always writes pendingToolUse as null, so the save at point A
does not record which tool is about to run: the last tool_use in messages has no result and is not
pending.
"""

import json
import os


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(dict(state, pendingToolUse=None), f)
    os.replace(path + ".tmp", path)
