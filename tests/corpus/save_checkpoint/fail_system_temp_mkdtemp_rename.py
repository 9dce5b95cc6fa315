"""VERDICT: fail ERROR

A scratch folder from tempfile.mkdtemp() (no dir: the system temp folder), then os.rename of the file
written there into the checkpoint folder. /tmp is another file system, so the rename fails with EXDEV.
"""

import json
import os
import tempfile


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(tempfile.mkdtemp(), "checkpoint.json")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f)
    os.rename(tmp, os.path.join(directory, "checkpoint.json"))
