"""VERDICT: fail ERROR

NamedTemporaryFile with no dir (so in /tmp), then os.replace. /tmp is another file system (as on a
usual machine), so os.replace fails with EXDEV and the loop stops at its first save.
"""

import json
import os
import tempfile


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", delete=False, encoding="utf-8") as f:
        json.dump(state, f)
    os.replace(f.name, os.path.join(directory, "checkpoint.json"))
