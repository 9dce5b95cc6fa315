"""VERDICT: pass

pathlib all the way: write_text on a sibling temp path, then Path.replace.
"""

import json
from pathlib import Path


def save_checkpoint(state, directory="checkpoints"):
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "checkpoint.json.tmp"
    tmp.write_text(json.dumps(state, ensure_ascii=False), encoding="utf-8")
    tmp.replace(folder / "checkpoint.json")
