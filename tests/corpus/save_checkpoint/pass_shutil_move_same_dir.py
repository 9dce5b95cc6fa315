"""VERDICT: pass

shutil.move from a temp file in the same folder: on one file system it is a plain rename.
"""

import json
import os
import shutil


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, "incoming.json")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f)
    shutil.move(tmp, os.path.join(directory, "checkpoint.json"))
