"""Save and load the agent's state (starter: it has a bug to find)."""

import json
import os


def save_checkpoint(state, directory):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "checkpoint.json"), "w", encoding="utf-8") as f:
        json.dump(state, f)


def load_checkpoint(directory):
    with open(os.path.join(directory, "checkpoint.json"), encoding="utf-8") as f:
        return json.load(f)
