"""VERDICT: pass

mkstemp in the folder, os.fdopen over its descriptor, flush and fsync, then replace.
"""

import json
import os
import tempfile


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="checkpoint-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(directory, "checkpoint.json"))
    except BaseException:
        os.unlink(tmp)
        raise
