"""Changes to ``os`` a level's own checks make on purpose, which the grading worker makes too; and the
platform faults of level 3's checks (:class:`MisbehavingOs`), made in a learner's own run.

Level 4 grades resume, not durability, so its checks make fsync free (:func:`free_fsync`). When
those checks run in ``crashcourse grade``'s judge, the learner's code runs in another process;
the replacement is marked with its name (``_crashcourse_forward``), the judge sends that name, and
the worker makes the same change from :data:`FORWARDED` (only names listed there are used).
"""

from __future__ import annotations

import errno
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


# The calls a platform check may make fail (see MisbehavingOs and grader.grading.faults).
FSYNC_OF_A_FILE, FSYNC_OF_A_FOLDER, OPENING_A_FOLDER = "fsync of a file", "fsync of a folder", "opening a folder"


def _is_directory(fd: int) -> bool:
    import stat
    try:
        return stat.S_ISDIR(os.fstat(fd).st_mode)
    except OSError:
        return False


class MisbehavingOs:
    """``os`` made to fail some calls from :meth:`arm` on, as a platform check asks (a dict):
    ``fails`` names the calls (an fsync of a file, where a write to a file opened with O_SYNC counts
    as one; an fsync of a folder; opening a folder), ``once`` whether only the first one fails (EIO,
    or PermissionError for a folder), ``platform`` "windows" makes Python look like Windows too.

    After the run, :attr:`failed` lists the calls that failed and :attr:`whole_syncs` says whether
    ``os.sync()`` was called. :meth:`undo` puts everything back. A learner's own run of a check
    uses this; ``crashcourse grade`` has the kernel fail the calls instead, and uses this only
    where strace cannot run (in the worker, and says so).
    """

    def __init__(self, fault: dict):
        self.fails, self.once, self.platform = fault["fails"], bool(fault.get("once")), fault.get("platform")
        self.real = {name: getattr(os, name) for name in ("fsync", "fdatasync", "open", "write", "sync")
                     if hasattr(os, name)}
        self.failed: list = []
        self.whole_syncs = False
        self.synced_opens: set = set()
        self.undone: list = []

    def _fails_now(self, fd: int) -> bool:
        if _is_directory(fd) != (self.fails == FSYNC_OF_A_FOLDER):
            return False
        return not (self.once and self.failed)

    def _fsync(self, fd: Any) -> None:
        fd = fd.fileno() if hasattr(fd, "fileno") else fd
        if self._fails_now(fd):
            self.failed.append(fd)
            raise OSError(errno.EIO, "Input/output error")
        return self.real["fsync"](fd)

    def _noting_open(self, path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        fd = self.real["open"](path, flags, *args, **kwargs)
        if flags & (getattr(os, "O_SYNC", 0) | getattr(os, "O_DSYNC", 0)):
            self.synced_opens.add(fd)
        return fd

    def _sync(self) -> None:
        self.whole_syncs = True
        return self.real["sync"]()

    def _write(self, fd: int, data: Any) -> int:
        if fd in self.synced_opens and self.fails == FSYNC_OF_A_FILE and self._fails_now(fd):
            self.failed.append(fd)
            raise OSError(errno.EIO, "Input/output error")
        return self.real["write"](fd, data)

    def _folder_refusing_open(self, path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if kwargs.get("dir_fd") is None and os.path.isdir(path):
            self.failed.append(path)
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return self.real["open"](path, flags, *args, **kwargs)

    def arm(self) -> None:
        if self.platform == "windows":
            self.undone.append(windows_like())
        if self.fails == OPENING_A_FOLDER:
            os.open = self._folder_refusing_open
            return
        os.fsync = self._fsync
        if "fdatasync" in self.real:
            os.fdatasync = self._fsync
        os.open, os.write = self._noting_open, self._write
        if "sync" in self.real:
            os.sync = self._sync

    def undo(self) -> None:
        for name, fn in self.real.items():
            setattr(os, name, fn)
        for step in reversed(self.undone):
            step()
        self.undone.clear()
