"""VERDICT: fail TRACE

Deletes the old checkpoint, then renames the new one in (the Windows habit): between the two steps
there is no checkpoint at all. Every save after the first comes after a tool has started, so the
gap loses a started tool call (TRACE).
"""

import json
import os


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(state, f)
    if os.path.exists(path):
        os.remove(path)
    os.rename(path + ".tmp", path)
