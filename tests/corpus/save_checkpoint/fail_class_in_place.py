"""VERDICT: fail PARSE

A class that keeps one file handle open and rewrites it on each save: seek, truncate, write,
flush. Every save empties the live checkpoint before refilling it.
"""

import json
import os

_writers = {}


class Checkpointer:
    def __init__(self, directory):
        os.makedirs(directory, exist_ok=True)
        self.f = open(os.path.join(directory, "checkpoint.json"), "w", encoding="utf-8")

    def save(self, state):
        self.f.seek(0)
        self.f.truncate()
        json.dump(state, self.f)
        self.f.flush()


def save_checkpoint(state, directory="checkpoints"):
    writer = _writers.get(directory)
    if writer is None:
        writer = _writers[directory] = Checkpointer(directory)
    writer.save(state)
