"""VERDICT: fail PARSE

Path.write_text straight onto checkpoint.json: a one-liner, and an in-place overwrite all the same.
"""

import json
from pathlib import Path


def save_checkpoint(state, directory="checkpoints"):
    Path(directory).mkdir(exist_ok=True)
    Path(directory, "checkpoint.json").write_text(json.dumps(state), encoding="utf-8")
