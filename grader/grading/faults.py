"""Faults the kernel makes for a check, under ``crashcourse grade``: a failing fsync, a folder that
cannot be opened.

Some checks need the platform to misbehave for one call: level 3 saves twice and makes the second
save's fsync report an I/O error (EIO), or refuses to open a folder (EACCES, as on Windows). In a
learner's own pytest run the check patches ``os`` in its own process. Under ``crashcourse grade``
the code runs in a box and the check in the judge, so the fault comes from outside the box
instead: the worker runs under strace (:mod:`grader.grading.kernel_trace`), and strace's
``inject=NAME:error=ERRNO:when=N`` makes the kernel fail the N-th call of that name a thread makes.

Which N? The check's steps run first in a worker with no fault, and its kernel trace says which
calls the fault is meant for: an fsync of a file (or a write to a file opened with ``O_SYNC``), an
fsync of a folder, or an open of a folder, made after the check armed the fault. Those counts
become the injection of the next run (:func:`plan`). A fault changes what the code does next (it
may retry, or go on to the folder), so each run's trace is read again: the calls the fault should
have hit (:func:`wanted`) against the ones it did hit (:func:`hit`). When they agree, that run is
the one the check is judged on; when they differ, the plan is corrected and the steps run again,
a few times at most (:data:`ATTEMPTS`). strace counts calls per thread and per name, and one
``when=`` takes an arithmetic series (``3..7+2``) that holds for every thread. Nothing in the box
tells a fault run from another: no padding, no variable, only the calls the fault fails.

Correct code whose calls no such series singles out (the folder opened twice per save, parent and
folder; the folder opened before the write and fsynced after the rename; fsyncs on a worker thread,
or in a new thread each save) still gets its check, made another way that can be made: ``os`` is
patched in the box, as in the learner's own pytest run (:data:`FALLBACK`, said in the finding), and
the worker is still traced. A call the fault was for that reached the kernel after the fault was
armed and succeeded went around the patch (:func:`slipped`): for a fault every such call must meet,
the check then earns nothing and says why (:data:`WENT_AROUND`). Known limit: code that sees the
patch (its ``os.fsync`` is not the one it had) and makes its calls uncountable on purpose can act
correctly only there; for a fault that fails once, a call around the patch cannot be told from a
retry. Both need code written against the grader, and a fault run by count stays the rule.

Nothing here believes the worker: whether a save raised comes from the judge's own stand-in
(:mod:`grader.grading.stand_in`), which calls failed and whether a whole-disk ``sync`` ran come
from the trace, and the files the check reads afterwards are read by the judge with ``O_NOFOLLOW``.

Where strace cannot run (not installed, ptrace refused), the stand-in falls back to the learner's
own way, in the worker: ``os`` is patched there (:class:`grader.engine.forwarded.MisbehavingOs`)
and the worker reports which calls failed. Code in the box could undo that, so each finding of
such a check says how the fault was made.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

from grader.engine.forwarded import FSYNC_OF_A_FILE, FSYNC_OF_A_FOLDER, OPENING_A_FOLDER
from grader.grading.kernel_trace import Call

__all__ = ["ATTEMPTS", "ERRORS", "FALLBACK", "FSYNC_OF_A_FILE", "FSYNC_OF_A_FOLDER", "OPENING_A_FOLDER", "WENT_AROUND",
           "Fault", "FaultRun", "after_arming", "describe", "hit", "is_directory", "plan", "slipped", "wanted",
           "whole_syncs", "worker_threads"]

# The kinds of call a check may ask to fail (named once, with the in-process faults), and the error each reports.
ERRORS = {FSYNC_OF_A_FILE: "EIO", FSYNC_OF_A_FOLDER: "EIO", OPENING_A_FOLDER: "EACCES"}
SYNCS = ("fsync", "fdatasync")
WRITES = ("write", "pwrite64", "writev", "pwritev", "pwritev2")
OPENS = ("open", "openat")
ATTEMPTS = 5  # runs of one check's steps at most: the run without a fault, then corrections
# Said in a finding when counting calls could not make the check and the fault was made in the box instead.
FALLBACK = ("(The kernel could not fail exactly the calls this check is for ({fails}) by counting them: your code "
            "made them from several threads, or in an order one count per call cannot cover. So the fault was made "
            "the way your own pytest run makes it, by patching os in the box, and the kernel's trace watched for "
            "calls that went around the patch.)")
WENT_AROUND = ("The fault for this check ({fails}) was made by patching os in the box (counting calls could not "
               "single them out), and your code went around it: the kernel saw {call} succeed after the fault was "
               "armed. The check could not be made, so it earns nothing. Make those calls through os, from the "
               "thread that calls save_checkpoint.")


@dataclass(frozen=True)
class Fault:
    """What a check asks the kernel to fail: ``fails`` (one of :data:`ERRORS`), once or every time."""
    fails: str
    once: bool = False

    @classmethod
    def from_dict(cls, spec: dict) -> "Fault":
        fails = spec.get("fails")
        if fails not in ERRORS:
            raise ValueError(f"a fault fails one of {sorted(ERRORS)}, not {fails!r}")
        return cls(fails, bool(spec.get("once")))


@dataclass
class FaultRun:
    """What a check reads after its steps ran with the fault (the same fields in-process).

    ``value``: what the steps returned. ``failed``: the calls the fault hit, in words. ``whole_syncs``:
    whether the code called ``sync()`` or ``syncfs()`` after the fault was armed. ``exact``: whether
    the fault hit exactly the calls it was meant for. ``note``: what a finding should add about how
    the fault was made, when that weakens it. ``read(path)``: a file's bytes, or None.
    """
    value: Any
    failed: list = field(default_factory=list)
    whole_syncs: bool = False
    exact: bool = True
    note: Optional[str] = None
    read: Callable[[str], Optional[bytes]] = lambda path: None


def is_directory(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)  # the worker has stopped: nothing changes it now
    except (OSError, ValueError):
        return False


def _meant(call: Call, fault: Fault, is_dir: Callable[[str], bool]) -> bool:
    """Whether ``call`` is one of the calls ``fault`` is for (whatever it returned)."""
    if fault.fails == OPENING_A_FOLDER:
        # As os.open(path) with no dir_fd; a listing (os.listdir, os.scandir: O_DIRECTORY|O_NONBLOCK,
        # and Python's own imports) is left alone, as the in-process check leaves it.
        listing = "O_DIRECTORY" in call.flags and "O_NONBLOCK" in call.flags
        return call.name in OPENS and call.at_cwd and not listing and \
            ("O_DIRECTORY" in call.flags or is_dir(call.path))
    if call.name in SYNCS:
        folder = "O_DIRECTORY" in call.flags or is_dir(call.path)
        return folder == (fault.fails == FSYNC_OF_A_FOLDER)
    if call.name in WRITES and fault.fails == FSYNC_OF_A_FILE:
        return "O_SYNC" in call.flags or "O_DSYNC" in call.flags  # each such write is its own fsync
    return False


def worker_threads(calls: Iterable[Call], main_tid: Optional[str]) -> set:
    """The worker's threads (and processes it started): the ones strace saw first after its main
    thread. The ones before are bubblewrap's, setting up the box."""
    order: dict = {}
    for c in calls:
        order.setdefault(c.tid, len(order))
    if main_tid not in order:
        return set()
    return {tid for tid, n in order.items() if n >= order[main_tid]}


def after_arming(calls: Iterable[Call], tids: set, armed_at: int) -> list:
    """The calls of the worker's threads ``tids`` from the moment the check armed the fault."""
    return [c for c in calls if c.tid in tids and c.wire >= armed_at]


def wanted(calls: list, fault: Fault, is_dir: Callable[[str], bool] = is_directory) -> list:
    """``(thread, name, ordinal)`` of the calls the fault should hit in this run: the first one, or all."""
    out = []
    for call in calls:
        if _meant(call, fault, is_dir):
            out.append((call.tid, call.name, call.ordinal))
            if fault.once:
                break
    return out


def slipped(calls: list, fault: Fault, is_dir: Callable[[str], bool] = is_directory) -> list:
    """Where ``os`` was patched to make ``fault`` (in the box), the calls it is for that reached the kernel
    and succeeded, in words: each went around the patch. Only a fault every such call meets can say so:
    after a fault that fails once, the code's next such call (a retry) rightly succeeds."""
    if fault.once:
        return []
    return [describe(c, is_dir) for c in calls if c.ret >= 0 and _meant(c, fault, is_dir)]


def hit(calls: list) -> list:
    """``(thread, name, ordinal)`` of the calls strace failed on purpose."""
    return [(c.tid, c.name, c.ordinal) for c in calls if c.injected]


def _series(ordinals: list, avoid: set, open_ended: bool) -> Optional[tuple]:
    """``(first, last or None, step)``: an arithmetic series through ``ordinals`` that misses ``avoid``."""
    first = ordinals[0]
    step = ordinals[1] - first if len(ordinals) > 1 else 1
    if any(b - a != step for a, b in zip(ordinals, ordinals[1:])) or step <= 0:
        return None
    on_series = sorted(a for a in avoid if a >= first and (a - first) % step == 0)
    if any(a <= ordinals[-1] for a in on_series):
        return None
    if on_series:
        return first, on_series[0] - step, step
    return first, (None if open_ended else ordinals[-1]), step


def plan(calls: list, want: list, fault: Fault, first: bool = False) -> Optional[list]:
    """strace ``inject=`` expressions that fail the calls in ``want`` and none of the others seen
    in ``calls``, of any thread (each thread has its own counts, and ``when=`` holds for all), or
    None when one series per name cannot do that.

    ``first``: ``calls`` come from the run without the fault. A fault that fails every time then
    reaches past the calls seen after it: once a call has failed, the code goes another way (it
    may try again), and a later run corrects the plan if the fault hits a call it was not meant for.
    """
    out = []
    chosen = set(want)
    for name in sorted({n for _, n, _ in want}):
        ordinals = sorted({o for _, n, o in want if n == name})
        avoid = {c.ordinal for c in calls if c.name == name and (c.tid, c.name, c.ordinal) not in chosen
                 and not (first and not fault.once and name in SYNCS and c.ordinal > ordinals[-1])}
        # Only an fsync fault reaches past the last call seen: opens and writes are also how the
        # worker answers the judge and loads modules, which a fault must leave alone.
        series = _series(ordinals, avoid, open_ended=not fault.once and name in SYNCS)
        if series is None:
            return None
        start, last, step = series
        if last == start:
            when = f"{start}"
        elif last is None:
            when = f"{start}+" + (str(step) if step != 1 else "")
        else:
            when = f"{start}..{last}" + (f"+{step}" if step != 1 else "")
        out.append(f"{name}:error={ERRORS[fault.fails]}:when={when}")
    return out


def describe(call: Call, is_dir: Callable[[str], bool] = is_directory) -> str:
    what = "folder" if is_dir(call.path) else "file"
    return f"{call.name} of the {what} {os.path.basename(call.path) or call.path}"


def whole_syncs(calls: list) -> bool:
    return any(c.name in ("sync", "syncfs") for c in calls)
