"""VERDICT: pass

A small class owns the paths; save_checkpoint is a thin function over it.
"""

import json
import os


class CheckpointWriter:
    def __init__(self, directory):
        self.directory = directory
        self.final = os.path.join(directory, "checkpoint.json")
        self.temp = os.path.join(directory, ".checkpoint.json.writing")

    def write(self, state):
        os.makedirs(self.directory, exist_ok=True)
        with open(self.temp, "wb") as f:
            f.write(json.dumps(state, sort_keys=True).encode("utf-8"))
        self._publish()

    def _publish(self):
        os.replace(self.temp, self.final)


def save_checkpoint(state, directory="checkpoints"):
    CheckpointWriter(directory).write(state)
