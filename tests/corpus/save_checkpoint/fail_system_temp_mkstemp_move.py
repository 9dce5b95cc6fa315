"""VERDICT: fail ATOMIC-DIR,PARSE

The temp file goes to the system temp folder (mkstemp without dir), then shutil.move brings it in.
/tmp is another file system (as on a usual machine), so the move is a copy that a crash tears.
"""

import json
import os
import shutil
import tempfile


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(state, f)
    shutil.move(tmp, os.path.join(directory, "checkpoint.json"))
