"""VERDICT: fail PARSE

A class that owns the path and rewrites the live file on each save (open with "w", write, flush):
every save empties the checkpoint before refilling it.
"""

import json
import os


class Checkpointer:
    def __init__(self, directory):
        self.directory = directory
        self.path = os.path.join(directory, "checkpoint.json")

    def save(self, state):
        os.makedirs(self.directory, exist_ok=True)
        with open(self.path, "w", encoding="utf-8") as f:
            f.write(json.dumps(state))
            f.flush()


def save_checkpoint(state, directory="checkpoints"):
    Checkpointer(directory).save(state)
