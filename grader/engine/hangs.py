"""A learner's code that does not return: the time limit, where it was stuck, and not running it twice.

Every place the kit calls into a learner's file (``run_agent``, ``save_checkpoint``,
``load_checkpoint``, ``resume_agent``) does it inside :func:`time_limit`. When the limit fires, the
learner's own frames on the stack (never the kit's) say where the code was, and the story is told
once: which function got stuck, the file and line, and what to look for there.

A stuck function is remembered as a :class:`Hang` for as long as its file is unchanged. Inside any
later :func:`time_limit`, a call into one of the functions that were on the stuck stack is refused
at once with :class:`KnownHang`, so a test that would only wait for the same limit again stops in
no time, while a test that never calls the stuck code runs as usual. A face learns what happened
during a stretch of work from :func:`hang_mark` and :func:`hangs_since`.

No pytest here, and no faces: the plugin and ``crashcourse check`` decide how to show a hang.
"""

from __future__ import annotations

import contextlib
import linecache
import os
import signal
import sys
import sysconfig
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

try:  # signal.signal without its enum wrapping, which was half the cost of a limit (level 6 sets a
    # thousand of them a run, one per call of the learner's loader)
    from _signal import signal as _set_handler
except ImportError:  # pragma: no cover - an interpreter without the C module
    _set_handler = signal.signal

__all__ = ["LOOP_TIMEOUT", "Hang", "KnownHang", "LoopTimeout", "absorb", "adopt", "current_hangs", "forget_hangs",
           "hang_mark", "hangs_since", "limit_told", "loop_timeout", "met_elsewhere", "on_slow_loop",
           "refused_elsewhere", "refusing", "remaining", "reset_after_fork", "time_limit"]

# A correct loop on the scripted model finishes in well under a second, so a few seconds is plenty;
# the grader's batch runs many submissions at once on a busy machine and sets a longer one.
LOOP_TIMEOUT = float(os.environ.get("CRASHCOURSE_LOOP_TIMEOUT") or 5.0)


def loop_timeout() -> float:
    """The limit for one call into the learner's code, read when it is needed (a test may change it)."""
    return LOOP_TIMEOUT


@dataclass
class Hang:
    """A learner's function stopped for running too long, and what the learner is told about it."""

    function: str         # the learner's function the code was in ("save_checkpoint")
    place: str            # "agent.py, line 9, in save_checkpoint", or "" when no frame was the learner's
    story: str            # the whole account, told once per run
    seconds: float
    codes: frozenset = frozenset()   # (file, first line, name) of each learner function on the stuck stack
    files: dict = field(default_factory=dict)   # each of those files -> (mtime_ns, size) when it got stuck
    spot: str = ""        # the place said another way ("line 9 of agent.py"), for the short mentions

    def current(self) -> bool:
        """True while every file it was stuck in is as it was: an edited file may no longer hang."""
        for path, seen in self.files.items():
            try:
                st = os.stat(path)
            except OSError:
                return False
            if (st.st_mtime_ns, st.st_size) != seen:
                return False
        return True

    def summary(self) -> str:
        """One line: which function got stuck, where, and after how long."""
        where = f" at {self.place}" if self.place else ""
        return f"{self.function} got stuck{where} and was stopped after {self.seconds:g} s"

    def refusal(self) -> str:
        """What a later call into the stuck code is told instead of running."""
        where = f", at {self.spot}" if self.spot else ""
        return (f"{self.function} was not run again: it got stuck earlier in this run{where}, and would only be "
                "stopped again. Fix that first.")


class LoopTimeout(BaseException):
    """The learner's code did not return in time (a loop that never ends, or a wait that never does).

    A BaseException, like KeyboardInterrupt: a learner's ``except Exception`` around a retry must not
    swallow the stop and spin on. ``where`` is the learner's place ("agent.py, line 15, in
    save_checkpoint"), or ""; ``hang`` is the :class:`Hang` recorded for it, if any.
    """

    def __init__(self, message: str, where: str = "", hang: Optional[Hang] = None):
        super().__init__(message)
        self.where = where
        self.hang = hang


class KnownHang(LoopTimeout):
    """A call into code that got stuck earlier in this run, refused before it could run."""


_HANGS: list = []        # Hang, in the order they happened
_EVENTS: list = []       # ("stopped" | "refused", Hang), in order: what hang_mark / hangs_since count
_progress_sinks: list = []
_timing: list = []       # the owners of the time limits running now (at most one sets the alarm)
_deadlines: list = []    # [time.monotonic() when the running limit stops the code, its whole limit in seconds]
_paused_since: list = []  # time.monotonic() when the running limit's clock was stopped (paused), if it is


def on_slow_loop(sink: Callable[[str], None]) -> Callable[[], None]:
    """Register ``sink(line)``, told once when a call into the learner's code has run for a while (a face
    shows it live). Returns the function that unregisters it."""
    _progress_sinks.append(sink)
    return lambda: _progress_sinks.remove(sink) if sink in _progress_sinks else None


def remaining() -> float:
    """Seconds left before the running :func:`time_limit` stops the code (0: no limit is running here).
    A call that runs the learner's code in another process gives that process this budget, so the
    story of a hang is told there, from the learner's own frames."""
    if not _deadlines:
        return 0.0
    now = _paused_since[-1] if _paused_since else time.monotonic()  # the clock stands still in paused()
    return max(0.0, _deadlines[-1][0] - now)


@contextlib.contextmanager
def paused(charge: float = 0.0) -> Iterator[None]:
    """Stop the running :func:`time_limit`'s clock for the block: the grader's own work in it (starting
    a grading box, or answering a model or tool call from the box, which a busy machine can make take
    seconds) is not time the code under test spent. Its first ``charge`` seconds still count, so that
    a loop that does little but call (a retry without end) is stopped as it would be in-process.
    A limit that has already run out is not paused: the code is being stopped, and the stop is raised
    again every second for as long as it catches it.
    """
    if not _deadlines or _paused_since or not hasattr(signal, "setitimer") \
            or threading.current_thread() is not threading.main_thread() or remaining() <= 0:
        yield
        return
    left, interval = signal.setitimer(signal.ITIMER_REAL, 0)
    if left <= 0:  # the alarm has just gone off (its handler runs next): nothing to pause
        yield
        return
    started = time.monotonic()
    _paused_since.append(started)
    try:
        yield
    finally:
        _paused_since.pop()
        spent = time.monotonic() - started
        deadline = _deadlines[-1]
        counted = min(spent, charge)
        deadline[0] += spent - counted
        # (At once when the counted part used up what was left: the limit then stops the code as usual.)
        signal.setitimer(signal.ITIMER_REAL, max(left - counted, 0.001), interval)


_heard = [0]  # messages from the grading box so far (heard_from_the_box)
BACKSTOP_WAITS = 2  # how many times a limit on code in the box waits as long again for the box's own story


def heard_from_the_box() -> None:
    """The grading box sent the judge a message: a limit on code running there (a stand-in's) is not
    yet a box gone silent."""
    _heard[0] += 1


# How much of each call from the box that the judge answers counts as the code's time: an answer on a quiet
# machine takes a millisecond or two; what a busy one adds beyond this is the grader's.
CALL_CHARGE = 0.05


def limit_told() -> float:
    """The whole limit of the running :func:`time_limit`, in seconds (0: none), as its story tells it."""
    return _deadlines[-1][1] if _deadlines else 0.0


def met_elsewhere(function: str, place: str, story: str, seconds: float, spot: str = "") -> Hang:
    """A hang that happened in another process (the grading sandbox), told there from the learner's
    frames: counted here as if it had happened here, so the faces tell it once, then say "Not run"."""
    hang = Hang(function, place, story, seconds, spot=spot)
    _EVENTS.append(("stopped", hang))
    return hang


def refused_elsewhere(hang: Hang) -> KnownHang:
    """The refusal of a call into code that got stuck in another process earlier in this run."""
    _EVENTS.append(("refused", hang))
    return KnownHang(hang.refusal(), hang.place, hang)


def current_hangs() -> list:
    """The hangs still worth refusing: those whose files have not changed since (stale ones are dropped)."""
    _HANGS[:] = [h for h in _HANGS if h.current()]
    return list(_HANGS)


def forget_hangs() -> None:
    """Forget every hang (a fresh check of files that may have been fixed)."""
    _HANGS.clear()


def reset_after_fork() -> None:
    """In a child forked to run one job (grader.engine.fresh): no limit is running, nobody is shown progress."""
    _timing.clear()
    _deadlines.clear()
    _paused_since.clear()
    _progress_sinks.clear()


def adopt(known: list) -> None:
    """Take ``known`` (another process's :func:`current_hangs`) as this process's hangs."""
    _HANGS[:] = list(known)


def absorb(events: list) -> None:
    """Take the ``(kind, Hang)`` events another process met (:func:`hangs_since`) as met here."""
    for kind, hang in events:
        _EVENTS.append((kind, hang))
        if kind == "stopped" and hang.codes and hang not in _HANGS:
            _HANGS.append(hang)


def hang_mark() -> int:
    """A mark to pass to :func:`hangs_since` later."""
    return len(_EVENTS)


def hangs_since(mark: int) -> list:
    """``(kind, Hang)`` for each time since ``mark`` that code was stopped ("stopped") or refused because
    it had got stuck before ("refused")."""
    return list(_EVENTS[mark:])


def _code_key(code: Any) -> tuple:
    return (code.co_filename, code.co_firstlineno, code.co_name)


def _owner_code(owner: Any) -> Any:
    return getattr(getattr(owner, "__func__", owner), "__code__", None)


def owner_file(owner: Any) -> str:
    """The learner's file ``owner`` (a function, or the path of a file being imported) comes from, or ""
    when it is not the learner's (under ``crashcourse grade`` it is the kit's stand-in)."""
    if isinstance(owner, (str, os.PathLike)):
        return os.path.realpath(owner)
    code = _owner_code(owner)
    filename = getattr(code, "co_filename", "") or ""
    if not filename or filename.startswith("<"):
        return ""
    known = _OWNER_FILES.get(filename)
    if known is None:
        # Once per file name: level 6 runs the learner's loader under a limit a thousand times a run.
        known = _OWNER_FILES[filename] = "" if _is_kit(filename) else os.path.realpath(filename)
    return known


_OWNER_FILES: dict = {}  # a code object's file name -> what owner_file makes of it


# Installed code, never the learner's: the standard library, site-packages, and the scripts folder (the
# `crashcourse` and `pytest` commands, the bottom frame of every stack in a process they started).
_LIBRARIES = tuple(os.path.realpath(p) + os.sep for p in {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib",
                                                                                            "purelib", "platlib",
                                                                                            "scripts")})


def _is_kit(filename: str) -> bool:
    return os.sep + "grader" + os.sep in filename


def _is_learners(filename: str, folder: str) -> bool:
    """A frame of the learner's own code: a file in the folder of the code under test (or, when that is
    not known, any file that is neither the kit's nor a library's), never the tests beside it."""
    if filename.startswith("<") or os.path.basename(filename).startswith("test_") or _is_kit(filename):
        return False
    path = os.path.realpath(filename)
    if folder:
        return os.path.dirname(path) == folder
    return not path.startswith(_LIBRARIES) and "site-packages" not in path


def _learner_stack(frame: Any, folder: str) -> list:
    """The learner's frames on ``frame``'s stack, outermost first."""
    frames = []
    while frame is not None:
        if _is_learners(frame.f_code.co_filename, folder):
            frames.append(frame)
        frame = frame.f_back
    return frames[::-1]


def _place(frame: Any) -> str:
    return f"{os.path.basename(frame.f_code.co_filename)}, line {frame.f_lineno}, in {frame.f_code.co_name}"


def _story(function: str, seconds: float, frames: list, known: bool = True, others: tuple = ()) -> tuple[str, str]:
    """(place, story) of code stopped in ``frames`` (the learner's, outermost first). ``known``: the
    learner's file is known, so no frame of it means the code was inside a library call. ``others``:
    the learner's frames in each other thread (a loop that waits on a thread of its own)."""
    importing = function.startswith("importing ")
    subject = function[0].upper() + function[1:] if importing else function
    lines = [f"{subject} got stuck: it was still running after {seconds:g} s, so it was stopped."]
    place = ""
    if frames:
        last = frames[-1]
        place = _place(last)
        lines.append(f"  Where it was: {place}")
        text = linecache.getline(last.f_code.co_filename, last.f_lineno).strip()
        if text:
            lines.append(f"      {text}")
        for caller in reversed(frames[:-1][-2:]):
            lines.append(f"    called from {_place(caller)}")
    elif known:
        lines.append("  Where it was: inside a library call your code made (no line of your own file was running).")
    for stack in others[:2]:
        lines.append(f"  Another thread of yours was at: {_place(stack[-1])}")
        text = linecache.getline(stack[-1].f_code.co_filename, stack[-1].f_lineno).strip()
        if text:
            lines.append(f"      {text}")
    lines.append("  A correct file imports at once: its top level only defines things." if importing else
                 f"  A correct {function} returns in well under a second in these checks.")
    at = "at those lines " if frames and others else "at that line " if frames or others else ""
    lines.append("  What to try: look " + at + "for a loop that never ends (a "
                 "condition that never changes, an index that never moves on), or a call that waits forever "
                 "(time.sleep, input(), a lock, reading from a pipe).")
    return place, "\n".join(lines)


def _stat(path: str) -> Optional[tuple]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def _other_threads(folder: str) -> tuple:
    """The learner's frames in each thread but this one that is running their code."""
    here = threading.get_ident()
    stacks = (_learner_stack(frame, folder) for ident, frame in sys._current_frames().items() if ident != here)
    return tuple(stack for stack in stacks if stack)


def _remember(owner: Any, folder: str, frames: list, seconds: float) -> Hang:
    name = frames[-1].f_code.co_name if frames else getattr(owner, "__name__", "") or "the code under test"
    if name == "<module>" or isinstance(owner, (str, os.PathLike)) and not frames:
        name = f"importing {os.path.basename(frames[-1].f_code.co_filename if frames else os.fspath(owner))}"
    others = _other_threads(folder) if folder else ()
    place, story = _story(name, seconds, frames, known=bool(folder), others=others)
    codes = {_code_key(f.f_code) for f in frames} | {_code_key(f.f_code) for stack in others for f in stack}
    code = _owner_code(owner)
    if code is not None and folder:
        codes.add(_code_key(code))
    files = {}
    for path in {os.path.realpath(c[0]) for c in codes}:
        seen = _stat(path)
        if seen is not None:
            files[path] = seen
    spot = f"line {frames[-1].f_lineno} of {os.path.basename(frames[-1].f_code.co_filename)}" if frames else ""
    hang = Hang(name, place, story, seconds, frozenset(codes), files, spot)
    if codes:
        _HANGS.append(hang)
    return hang


@contextlib.contextmanager
def refusing(hangs: list) -> Iterator[None]:
    """Refuse, with :class:`KnownHang`, any call into a function that was on the stuck stack of one of
    ``hangs`` (:func:`current_hangs`), even outside a time limit."""
    if not hangs:
        yield
        return
    stuck = {key: h for h in hangs for key in h.codes}
    previous = sys.gettrace()

    def guard(frame: Any, event: str, arg: Any) -> Any:
        if event == "call":
            hang = stuck.get(_code_key(frame.f_code))
            if hang is not None:
                _EVENTS.append(("refused", hang))
                raise KnownHang(hang.refusal(), hang.place, hang)
        return previous(frame, event, arg) if previous is not None else None

    sys.settrace(guard)
    try:
        yield
    finally:
        sys.settrace(previous)


@contextlib.contextmanager
def time_limit(seconds: Optional[float], owner: Any = None, told: Optional[float] = None) -> Iterator[None]:
    """Stop the code under test after ``seconds`` with :class:`LoopTimeout`, saying where it was.

    ``owner`` is the learner's function being run: its file decides which frames are the learner's.
    ``told``: the limit the story names, when it is not ``seconds`` (the grading sandbox stops the
    code a little before the judge would, and tells the judge's limit).
    Calls into code that got stuck before are refused at once (:class:`KnownHang`). The stop is
    raised again every second for as long as the code keeps catching it.
    """
    hangs = current_hangs() if _HANGS else []
    on_main = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    if not seconds or not on_main or _timing:
        # (Inside another limit, the outer one's alarm stands: one timer per process.)
        with refusing(hangs):
            yield
        return
    path = owner_file(owner)
    folder = os.path.dirname(path) if path else ""
    # A first, shorter alarm lets a face say "still running" while the learner waits.
    warn_at = min(2.0, seconds / 2) if _progress_sinks else 0.0
    state = {"warned": not warn_at, "stop": None, "waited": 0, "heard": _heard[0]}
    # A stand-in for code that runs in the grading box (grader.grading.stand_in): the box stops that code a
    # little before this limit and says where it was; this process only waits for the answer.
    elsewhere = callable(getattr(owner, "in_a_fresh_process", None))
    name = (f"importing {os.path.basename(path)}" if isinstance(owner, (str, os.PathLike)) else
            getattr(owner, "__name__", "")) if path else ""

    def expire(signum: int, frame: Any) -> None:
        if not state["warned"]:
            state["warned"] = True
            signal.setitimer(signal.ITIMER_REAL, max(seconds - warn_at, 0.001))
            for sink in _progress_sinks:
                try:
                    sink(f"{name or 'your code'} has been running for {warn_at:g} s (a correct one returns in well "
                         f"under a second); it will be stopped at {seconds:g} s")
                except Exception:  # noqa: BLE001 - a progress line must never break the run
                    pass
            return
        if state["stop"] is None:
            frames = _learner_stack(frame, folder)
            if elsewhere and not frames and (not state["waited"] or state["heard"] != _heard[0]) \
                    and state["waited"] < BACKSTOP_WAITS:
                # The box stops the code itself and says where it was; this limit is the backstop for a box
                # gone silent. While the box still talks (a busy machine, this process reading the kernel's
                # trace of a run that wrote a lot), wait as long again for its story rather than tell one
                # from this process's frames; a few times at most, for code that catches every stop.
                state["waited"], state["heard"] = state["waited"] + 1, _heard[0]
                signal.setitimer(signal.ITIMER_REAL, seconds)
                return
            hang = _remember(owner, folder, frames, told or seconds)
            if hang.codes:  # the learner's own code (not a stand-in for code running elsewhere)
                _EVENTS.append(("stopped", hang))
            state["stop"] = LoopTimeout(hang.story, hang.place, hang)
        signal.setitimer(signal.ITIMER_REAL, 1.0)  # again, should the code catch this one and go on
        stop = state["stop"]
        raise LoopTimeout(str(stop), stop.where, stop.hang)

    previous = _set_handler(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, warn_at or seconds)
    _timing.append(owner)
    _deadlines.append([time.monotonic() + seconds, told or seconds])
    try:
        with refusing(hangs):
            yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _set_handler(signal.SIGALRM, previous)
        _timing.pop()
        _deadlines.pop()
