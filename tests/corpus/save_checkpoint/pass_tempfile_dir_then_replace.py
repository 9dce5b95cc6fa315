"""VERDICT: pass

mkstemp(dir=the checkpoint folder) through pathlib: the temp file sits beside checkpoint.json, so
os.replace is a rename within one file system, whatever file system the system temp folder is on.
"""

import json
import os
import tempfile
from pathlib import Path


def save_checkpoint(state, directory="checkpoints"):
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".checkpoint-", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(state, f)
    os.replace(tmp, folder / "checkpoint.json")
