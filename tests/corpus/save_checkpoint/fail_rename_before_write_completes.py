"""VERDICT: fail PARSE

os.write in two halves with the rename between them: the checkpoint's name points at a file whose
second half has not been written yet.
"""

import json
import os


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    data = json.dumps(state).encode("utf-8")
    half = len(data) // 2
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data[:half])
    os.replace(path + ".tmp", path)
    os.write(fd, data[half:])
    os.close(fd)
