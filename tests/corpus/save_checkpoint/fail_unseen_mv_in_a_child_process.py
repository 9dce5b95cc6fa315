"""VERDICT: fail UNSEEN

The rename is done by another program (`mv`, run with subprocess). It may be right, but the grader
cannot watch another process's file operations, so it says it cannot vouch for the file rather
than pass it.
"""

import json
import os
import subprocess


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(state, f)
    subprocess.run(["mv", "-f", path + ".tmp", path], check=True)
