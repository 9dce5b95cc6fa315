"""Changes to ``os`` a level's own checks make on purpose, which the grading worker makes too.

Level 4 grades resume, not durability, so its checks make fsync free (:func:`free_fsync`). When
those checks run in ``crashcourse grade``'s judge, the learner's code runs in another process;
the replacement is marked with its name (``_crashcourse_forward``), the judge sends that name, and
the worker makes the same change from :data:`FORWARDED` (only names listed there are used).
"""

from __future__ import annotations

import os
from typing import Any


def free_fsync_call(fd: Any) -> None:
    """What fsync becomes: it returns at once, but still fails on a bad descriptor."""
    os.fstat(fd.fileno() if hasattr(fd, "fileno") else fd)


# Marked so the judge makes the same change in the worker instead of refusing it as a patch of its own process.
free_fsync_call._crashcourse_forward = "free_fsync"


def free_fsync() -> dict:
    """Level 4 grades resume, not durability: fsync returns at once. Returns what it replaced."""
    saved = {name: getattr(os, name) for name in ("fsync", "fdatasync") if hasattr(os, name)}
    for name in saved:
        setattr(os, name, free_fsync_call)
    return saved


FORWARDED = {"free_fsync": free_fsync}


def windows_like() -> "Any":
    """Python looks like Windows to code loaded from now on: ``sys.platform`` is ``"win32"``, there is no
    ``os.O_DIRECTORY``, and warnings are not shown (one saying "cannot sync the folder here" is
    welcome). Only the look: the refusal to open a folder is made elsewhere (by patching ``os.open``
    in a learner's own run, by the kernel under ``crashcourse grade``). Returns a function that undoes it."""
    import sys
    import warnings

    caught = warnings.catch_warnings()
    caught.__enter__()
    warnings.simplefilter("ignore")
    platform, flag = sys.platform, getattr(os, "O_DIRECTORY", None)
    sys.platform = "win32"  # for code that checks the platform instead of catching the error
    if flag is not None:
        del os.O_DIRECTORY

    def undo() -> None:
        sys.platform = platform
        if flag is not None:
            os.O_DIRECTORY = flag
        caught.__exit__(None, None, None)
    return undo


# Platforms a worker can be asked to look like, by name (see grader.grading.worker).
PLATFORMS = {"windows": windows_like}
