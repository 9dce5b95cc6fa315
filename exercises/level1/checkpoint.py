"""Level 1: a checkpoint that remembers too little, and a loader that believes anything.

`save_checkpoint` is called by the agent loop at every save point, with the loop's whole state.
Right now it keeps only the conversation. Kill the loop and resume from this file, and the resumed
run loses count of its turns and its spend, cannot say which task it is on, and misses a tool call
that was cut off. `load_checkpoint` hands back whatever it finds, even a format it has never seen.

Your job: save exactly the six protocol fields (the state you are given also holds things that
only make sense inside this process: leave those out), and make `load_checkpoint` refuse a file
it cannot resume from, with the two exceptions below.

Run the grader with:  pytest exercises/level1
Ask for a nudge with: crashcourse hint 1
Then write the short answers in answers.md.
"""

import json
import os


class CheckpointError(Exception):
    """The checkpoint cannot be resumed from: unreadable, not an object, or missing a field."""


class UnsupportedVersion(CheckpointError):
    """The checkpoint's `version` is missing or is not one this code knows."""


def save_checkpoint(state, directory="checkpoints"):
    """Write the loop's state to ``<directory>/checkpoint.json`` so a new process can resume it."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "checkpoint.json"), "w", encoding="utf-8") as f:
        json.dump({"messages": state["messages"]}, f)


def load_checkpoint(directory="checkpoints"):
    """Read ``<directory>/checkpoint.json`` back; raise CheckpointError for a file resume cannot use."""
    with open(os.path.join(directory, "checkpoint.json"), encoding="utf-8") as f:
        return json.load(f)
