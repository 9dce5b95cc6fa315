"""VERDICT: pass

Names bound at import: `from os import replace, makedirs` and `from io import open as io_open`. The
recorder swaps such names in the submission's own module, so it still sees every step.
"""

from io import open as io_open
from json import dump
from os import makedirs, replace
from os.path import join


def save_checkpoint(state, directory="checkpoints"):
    makedirs(directory, exist_ok=True)
    path = join(directory, "checkpoint.json")
    with io_open(path + ".tmp", "w", encoding="utf-8") as f:
        dump(state, f)
    replace(path + ".tmp", path)
