"""VERDICT: fail PARSE

os.replace inside the with block: the tail of the JSON is still in Python's buffer when the temp
file takes the real name, so a kill right after the rename leaves a short file.
"""

import json
import os


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(state, f)
        os.replace(path + ".tmp", path)
