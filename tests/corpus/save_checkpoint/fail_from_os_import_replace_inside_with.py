"""VERDICT: fail PARSE

`from os import replace` bound at import, called inside the with block: the early binding does not
hide the mistake, the rename still lands before the tail of the JSON leaves Python's buffer.
"""

import json
import os
from os import replace


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(state, f)
        replace(path + ".tmp", path)
