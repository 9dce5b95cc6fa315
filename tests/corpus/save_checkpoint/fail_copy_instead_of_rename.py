"""VERDICT: fail PARSE

Writes a temp file correctly, then copies it over the checkpoint: shutil.copyfile empties the
target and refills it, which is an in-place overwrite again.
"""

import json
import os
import shutil


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(state, f)
    shutil.copyfile(path + ".tmp", path)
