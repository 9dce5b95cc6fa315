"""VERDICT: fail COUNTS,PARSE

Reuses the file with r+ and never truncates: a kill mid-write leaves new bytes over the old
file's tail. Usually that is not JSON (PARSE); sometimes the new head and the old tail close into
valid JSON whose counters disagree with its messages (COUNTS): a mix that parses.
"""

import json
import os


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    mode = "r+" if os.path.exists(path) else "w"
    with open(path, mode, encoding="utf-8") as f:
        f.seek(0)
        json.dump(state, f)
