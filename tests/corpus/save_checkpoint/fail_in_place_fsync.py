"""VERDICT: fail PARSE

In place, with flush and fsync: durability does not make an in-place overwrite atomic. The file
is still emptied before the new bytes arrive.
"""

import json
import os


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "checkpoint.json"), "w", encoding="utf-8") as f:
        json.dump(state, f)
        f.flush()
        os.fsync(f.fileno())
