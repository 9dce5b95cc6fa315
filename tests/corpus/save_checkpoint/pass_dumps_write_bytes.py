"""VERDICT: pass

Serialise first with json.dumps, then Path.write_bytes to the temp file and os.replace.
"""

import json
import os
from pathlib import Path


def save_checkpoint(state, directory="checkpoints"):
    Path(directory).mkdir(exist_ok=True)
    blob = json.dumps(state, separators=(",", ":")).encode("utf-8")
    tmp = Path(directory, "checkpoint.json.new")
    tmp.write_bytes(blob)
    os.replace(tmp, Path(directory, "checkpoint.json"))
