"""VERDICT: fail ATOMIC-DIR

NamedTemporaryFile with no dir (so in /tmp), then os.replace. Works here only because /tmp is on
the same file system; elsewhere os.replace fails with EXDEV, or a fallback copy tears.
"""

import json
import os
import tempfile


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", delete=False, encoding="utf-8") as f:
        json.dump(state, f)
    os.replace(f.name, os.path.join(directory, "checkpoint.json"))
