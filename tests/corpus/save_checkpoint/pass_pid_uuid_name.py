"""VERDICT: pass

A temp name unique per process and per save (pid and uuid), so two writers never share one.
"""

import json
import os
import uuid


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f"checkpoint.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f, indent=1)
    os.replace(tmp, os.path.join(directory, "checkpoint.json"))
