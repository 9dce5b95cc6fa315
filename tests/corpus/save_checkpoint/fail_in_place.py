"""VERDICT: fail PARSE

Overwrites checkpoint.json in place: open(..., "w") empties it first, so a kill mid-save leaves an
empty or half-written file.
"""

import json
import os


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "checkpoint.json"), "w", encoding="utf-8") as f:
        json.dump(state, f)
