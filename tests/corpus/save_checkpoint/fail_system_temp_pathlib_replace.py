"""VERDICT: fail ERROR

Path(tempfile.gettempdir()) / a name, write_text, then Path.replace into the checkpoint folder. /tmp is
another file system, so the replace fails with EXDEV.
"""

import json
import os
import tempfile
from pathlib import Path


def save_checkpoint(state, directory="checkpoints"):
    Path(directory).mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.gettempdir()) / f"checkpoint-{os.getpid()}.json"
    tmp.write_text(json.dumps(state), encoding="utf-8")
    tmp.replace(Path(directory) / "checkpoint.json")
