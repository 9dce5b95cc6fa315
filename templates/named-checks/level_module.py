"""Level NUMBER: TITLE (the level module the manifest names; copy to grader/levels/NAME.py).

A level judged by named checks of its own: each check is a function of the learner's module that
returns None when it holds, else the story of what went wrong (with the causes it names). The
checks, their matrix words and the causes are declared here, when the module is imported, under
the level's own namespace; nothing in the kit is edited. The level imports from the kit only
:mod:`grader.levels.api`.

This template checks a ``checkpoint.py`` with ``save_checkpoint(state, directory)`` and
``load_checkpoint(directory)``: what is saved comes back as it was, and a folder with no checkpoint
loads as None. Replace the checks with your level's.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Optional

from grader.levels.api import (CHECKPOINT_NAME, Check, NamedChecks, NamedChecksLevel, declare, declare_causes,
                               working_in)

NAMESPACE = "toy-checks"   # your level's own: its check ids and cell words live under it

declare(NAMESPACE, [
    Check(NAMESPACE, "round-trip", "what save_checkpoint writes, load_checkpoint gives back unchanged",
          "comes back changed", legend=(("comes back changed", "the state loaded is not the state saved"),)),
    Check(NAMESPACE, "no-file", "a folder with no checkpoint loads as None", "raises on no file",
          legend=(("raises on no file", "load_checkpoint raised on a folder that holds no checkpoint yet"),)),
], other_cells=(("ok", "the check holds"), ("stuck", "the code did not return in time, so nothing was checked")))

# Why a check failed, as data: a test records these, and hints.md leads each to its questions.
declare_causes(NAMESPACE, {
    "lossy-save": "the state that comes back from the file is not the state that was saved",
    "missing-file-raises": "load_checkpoint raises when the folder holds no checkpoint, instead of returning None",
})

STATE = {"version": 1, "task": "Sort the tickets — by type", "turns": 2, "tokensUsed": 1234,
         "messages": [{"role": "user", "content": "Sort the tickets — by type"}], "pendingToolUse": None}


def story(what: str, on_disk: str, wrong: str, resume: str, question: str) -> str:
    """A failure told as the kit tells one: what happened, what was on disk, what is wrong, what a
    resume would run into, and a question to start from."""
    return "\n".join([what, f"  On disk: {on_disk}.", f"  What is wrong: {wrong}.",
                      f"  What resume would run into: {resume}.", "", question])


def check_round_trip(module: Any, seed: int = 0) -> Optional[tuple]:
    with tempfile.TemporaryDirectory(prefix="crashcourse-toy-") as work, working_in(work):
        module.save_checkpoint(json.loads(json.dumps(STATE)), work)
        path = os.path.join(work, CHECKPOINT_NAME)
        on_disk = f"{CHECKPOINT_NAME}, {os.path.getsize(path)} bytes" if os.path.exists(path) else "no checkpoint.json"
        loaded = module.load_checkpoint(work)
    if loaded == STATE:
        return None
    return story("Saved a state, then loaded it back: it came back different.", on_disk,
                 f"load_checkpoint returned {json.dumps(loaded, ensure_ascii=False, default=repr)[:90]}",
                 "it would carry on a task that is not the one that was saved",
                 "Does the file hold every field, as JSON, and does the loader return exactly what json.load gives?"), \
        ["lossy-save"]


def check_no_file(module: Any, seed: int = 0) -> Optional[tuple]:
    with tempfile.TemporaryDirectory(prefix="crashcourse-toy-") as work, working_in(work):
        try:
            loaded = module.load_checkpoint(work)
        except Exception as exc:  # noqa: BLE001 - which exception, if any, is what is checked
            wrong = f"load_checkpoint raised {type(exc).__name__}: {exc}"
        else:
            if loaded is None:
                return None
            wrong = f"load_checkpoint returned {json.dumps(loaded, default=repr)[:90]}"
    return story("Loaded from a folder where nothing had been saved yet.", "an empty folder", wrong,
                 "the very first run of a task would stop before it began",
                 "What should a loader say when there is no file yet, and how do you test for it before "
                 "opening?"), ["missing-file-raises"]


class ToyChecksLevel(NamedChecksLevel):
    namespace = NAMESPACE
    check_functions = {"round-trip": check_round_trip, "no-file": check_no_file}
    # The column's words: its summary, all well or not, what `crashcourse check` says of it when the
    # level passes or when the tests pass but a check here fails, and the heading of its legend.
    meaning = NamedChecks(fine="{title}: all {rows} checks hold", failing="{title}: {bad} of {rows} checks fail "
                                                                          "({names})",
                          passes="every check of save and load in the matrix",
                          disagrees="a check of save and load in the matrix above fails",
                          legend="What each check found:")
    heading = "check (save, then load)"
    engine_sentence = "Each row saves with this checkpoint.py and loads it back, and says what went wrong."


LEVEL = ToyChecksLevel()
