"""Run an agent loop under the recorder, then check every crash state it could leave behind.

This is the engine's front door::

    exploration = explore_loop(run, scenario, models=("M1", "M2"))
    if not exploration.ok:
        print(exploration.report())

``run(task, tools, call_model, execute_tool, directory)`` is the loop under test (a student's
``run_agent``). It runs once, for real, in a fresh temporary directory while every operation is
recorded; the crash states are then rebuilt in memory from the trace and each is checked against
the states a correct loop would have saved at that point.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import hashlib
import itertools
import os
import pickle
import re
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Container, Iterable, Iterator, Optional

from grader.engine import crash_models, fresh, layout
from grader.engine.crash_models import CrashState, MODEL_NAMES
from grader.engine.invariants import INVARIANTS, Finding, Window, check
from grader.engine.checkpoint import (CHECKPOINT_NAME, clone, exactly_saved, initial_state, reference_saves, snapshot,
                                     spend, tool_use_blocks)
from grader.engine.ops import short_name
from grader.engine.recorder import BOX_REFUSED_LINK, Op, Recorder, namespaces_of, temp_folder_apart
from grader.engine.scripted import Scenario
from grader.engine.turnstile import Turnstile
from grader.engine.hangs import LOOP_TIMEOUT, Hang, LoopTimeout, hang_mark, hangs_since, time_limit

POWER_MODELS = ("M3", "M4", "M5")

# The folders the levels hand the loop instead of the default "checkpoints", so code that ignores
# `directory` is caught: a nested relative path with a space in it, and an absolute path (which
# ABSOLUTE_FOLDER stands for; it becomes a folder inside the run's temporary directory).
NESTED_FOLDER = os.path.join("run data", "check points")
ABSOLUTE_FOLDER = "<absolute>/saved state"


def folder_in(workdir: str, directory: str) -> str:
    """The ``directory`` argument the loop is given: ``directory`` itself, or for ABSOLUTE_FOLDER an
    absolute path inside ``workdir``."""
    if directory.startswith("<absolute>/"):
        return os.path.join(workdir, "elsewhere", directory[len("<absolute>/"):])
    return directory


# A file system in memory, where there is one. The crash states are rebuilt from the recorded
# trace, never read back from the disk, so where a run's files live changes no verdict; on a disk,
# each rename and delete of a temp folder can cost a millisecond or more when the disk is busy.
_MEMORY = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def scratch_root() -> Optional[str]:
    """Where a level makes its temp folders: memory, unless TMPDIR names a folder (None: tempfile's choice).

    The grader's sandbox sets TMPDIR (and tempfile.tempdir) to the one folder its code may write
    in. tempfile.tempdir alone cannot tell a chosen folder from the default: tempfile fills it in
    the first time anything asks for a temp folder.
    """
    return None if os.environ.get("TMPDIR") else _MEMORY


def parent_exists(directory: str) -> None:
    """``before=`` hook: the folder around the checkpoint folder is there before the run starts.

    Level 3 uses it with NESTED_FOLDER: a loop that makes "check points" must fsync its parent
    ("run data"), which the lesson asks for; a parent that was already there needs nothing.
    """
    parent = os.path.dirname(directory)
    if parent:
        os.makedirs(parent, exist_ok=True)


def written_elsewhere(ops: list, ckpt_dir: str, workdir: str) -> str:
    """Where a loop that never wrote ``ckpt_dir``/checkpoint.json put its checkpoint instead, in words,
    ending with the question to ask."""
    question = " Does save_checkpoint use its `directory` argument, and does run_agent pass it on?"
    target = os.path.join(ckpt_dir, CHECKPOINT_NAME)
    places = []
    for op in ops:
        for path in ((op.dest,) if op.kind in ("rename", "link") else (op.path,) if op.kind == "open" else ()):
            if path and path != target and os.path.basename(path) == CHECKPOINT_NAME and path not in places:
                places.append(path)
    if not places:
        return question

    def show(path: str) -> str:
        return os.path.relpath(path, workdir) if path.startswith(workdir + os.sep) else path

    shown = [show(p) for p in places[:2]]
    told = f" It wrote {' and '.join(repr(p) for p in shown)} (relative to the folder it ran in) instead."
    # A temp file made in the right folder and renamed to a bare name: the name is read from the
    # working folder, not from the temp file's folder (Path.rename("checkpoint.json") does this).
    moved = next((op for op in ops if op.kind == "rename" and op.dest in places
                  and os.path.dirname(op.path) == ckpt_dir and os.path.dirname(op.dest) == workdir), None)
    if moved is not None:
        told += (f" Its temp file was in the right folder, but it renamed {show(moved.path)!r} to {show(moved.dest)!r}: "
                 "a relative destination is read from the folder the process runs in, not from the temp "
                 "file's folder. Which folder does your rename's destination name?")
        return told
    return told + question


def at_point(where: str) -> str:
    """A crash point read after a check id: "at turn 2, save point A", but "after run_agent returned"."""
    return where if where.split(" ", 1)[0] in ("after", "before", "while", "during", "mid") else f"at {where}"


@dataclass
class Violation:
    """One invariant broken in one crash state, with everything a learner needs to see why."""

    invariant: str
    model: str
    point: int
    where: str           # the crash point in the loop's words
    operation: str       # the operation the crash fell after (or in the middle of)
    files: dict          # what the checkpoint directory held
    detail: str
    resume: str
    rerun: str = ""
    cause: str = ""      # why, as data: a key of grader.engine.invariants.CAUSES, or ""

    def explain(self) -> str:
        """The full lesson of one failure: where, what was on disk, which rule, what resume hits."""
        lines = [f"{self.invariant} broken: {INVARIANTS[self.invariant]}.",
                 f"  Crash point: {self.where}, {self.operation}.",
                 f"  Crash model: {self.model}, {MODEL_NAMES.get(self.model, self.model)}."]
        lines.append("  On disk:" if self.files else "  On disk: the checkpoint directory is empty.")
        for name, data in sorted(self.files.items()):
            lines.append(f"    {name}: {describe_bytes(data)}")
        lines.append(f"  What is wrong: {self.detail}.")
        lines.append(f"  What resume would run into: {self.resume}.")
        if self.rerun:
            lines.append(f"  Re-run just this check: {self.rerun}")
        return "\n".join(lines)


def describe_bytes(data: bytes, tail: int = 60) -> str:
    if not data:
        return "0 bytes (empty)"
    end = data[-tail:].decode("utf-8", "replace")
    return f"{len(data):,} bytes, ending {'…' if len(data) > tail else ''}{end!r}"


# What a run the recorder could not follow is told, after the list of what it missed. The recorder
# watches from inside Python; `crashcourse grade` (where strace runs) reads the kernel's account, which
# sees writes through ctypes, C extensions and other programs, so the two can score such code apart.
UNSEEN_ADVICE = ("Where the grader watches from inside Python (your own pytest, `crashcourse check`), it sees files "
                 "written with open(), pathlib, os, tempfile and shutil, in your process and in a child it forks "
                 "with os.fork; writes made by another program (subprocess, os.system), through ctypes or another C "
                 "extension, or by sqlite3 reach the disk past it, so it cannot tell what a crash would leave, and "
                 "the run earns nothing. `crashcourse grade` reads the kernel's own account of every write (where "
                 "strace can run) and judges those writes on what they do, so its score for such code may differ; "
                 "a memory map or a symbolic link in the checkpoint folder it refuses too. Write the checkpoint "
                 "with Python's own file functions, and every face gives the same.")


@dataclass
class Exploration:
    """What exploring one run found."""

    scenario: str
    models: tuple
    ops: list = field(default_factory=list)
    states: int = 0
    points: int = 0
    violations: list = field(default_factory=list)
    unseen: list = field(default_factory=list)
    error: Optional[str] = None
    returned: Any = None
    seconds: float = 0.0
    # Broken states past the cap on kept violations, counted by invariant so totals stay exact.
    over_cap: dict = field(default_factory=dict)
    folder: str = ""     # the checkpoint folder the loop was given (absolute)
    workdir: str = ""    # the folder it ran in
    # Per crash model: [crash states, broken ones], so a total can be split the way the tests split it.
    by_model: dict = field(default_factory=dict)
    # checkpoint.json as the run left it once run_agent returned (None: there was none).
    final_file: Optional[bytes] = None
    # The learner's code got stuck (or was not run again, having got stuck before): no verdict.
    stuck: Optional[Hang] = None
    # Set once a test has shown this run's error in full: the tests that share the run name it in a line.
    told: bool = False

    @property
    def ok(self) -> bool:
        return not self.violations and not self.unseen and self.error is None

    @property
    def tripped(self) -> set:
        """The invariant ids that failed somewhere (plus ``ERROR`` or ``UNSEEN``)."""
        out = {v.invariant for v in self.violations}
        if self.error:
            out.add("ERROR")
        if self.unseen:
            out.add("UNSEEN")
        return out

    def first(self, invariant: Optional[str] = None) -> Optional[Violation]:
        for v in self.violations:
            if invariant is None or v.invariant == invariant:
                return v
        return None

    def raised(self) -> str:
        """The exception the run stopped on and the learner's line it came from, in one line ("" if none)."""
        if not self.error:
            return ""
        lines = self.error.splitlines()
        frames = [m for m in (re.match(r'\s*File "(.+)", line (\d+), in (.+)', line) for line in lines) if m]
        said = next((line for line in lines if line and not line.startswith(" ")), lines[0] if lines else "")
        if not frames:
            return said
        path, number, function = frames[-1].groups()
        return f"{said}, on line {number} of {path.replace(chr(92), '/').rsplit('/', 1)[-1]} (in {function})"

    def refused_by_box(self) -> bool:
        """Whether the run stopped because the grading box refused a symbolic link: then the link, which the
        crash models do not follow, is told first, as the learner's own pytest (where links work) tells it."""
        return bool(self.error) and any(BOX_REFUSED_LINK in u for u in self.unseen)

    def in_one_line(self) -> str:
        """Why the run gave no verdict, in one line: the exception and the learner's last line it was
        raised from, or that the grader could not see every write ("" when neither)."""
        if self.error and not self.refused_by_box():
            return f"your loop did not finish this run ({self.scenario}): {self.raised()}"
        if self.unseen:
            return f"the grader could not see everything your code did to the disk in this run ({self.scenario})"
        return ""

    def in_brief(self) -> str:
        """:meth:`in_one_line` for a line that points at the full story told elsewhere: an exception
        keeps its name and line, but the kit's own sentence about a run that stopped (it wrote
        nothing, or somewhere else) is not repeated."""
        if self.error and not self.traced() and not self.refused_by_box():
            return f"your loop did not finish this run ({self.scenario})"
        return self.in_one_line()

    def error_cause(self) -> str:
        """Why the run stopped, as a cause id, where the error says ("" otherwise)."""
        return "temp-cross-device" if self.error and crossed_file_systems(self.error) else ""

    def traced(self) -> bool:
        """Whether the run stopped on an exception with the learner's frames (not on the kit's words)."""
        return bool(self.error) and re.search(r'^\s*File "', self.error, re.M) is not None

    def report(self, rerun: str = "") -> str:
        """A learner-facing summary: the first failure in full, then a line for each other kind."""
        if self.stuck is not None:
            return self.error or self.stuck.story
        if self.error and not self.refused_by_box():
            return f"Your loop did not finish this run ({self.scenario}):\n{self.error}"
        if self.unseen:
            return ("The grader could not see everything your code did to the disk, so it cannot vouch for it:\n"
                    + "\n".join(f"  - {u}" for u in self.unseen[:5])
                    + "\n" + UNSEEN_ADVICE)
        if not self.violations:
            return f"{self.scenario}: {self.states} crash states at {self.points} crash points, all fine."
        first = self.violations[0]
        if rerun and not first.rerun:
            first.rerun = rerun
        by_kind: dict = {}
        for v in self.violations:
            by_kind.setdefault(v.invariant, []).append(v)
        lines = [f"{self.scenario}: {len(self.violations)} of {self.states} crash states break an invariant.", "",
                 first.explain()]
        others = [k for k in by_kind if k != first.invariant]
        if others or len(by_kind[first.invariant]) > 1:
            lines.append("")
            lines.append("Also:")
            for kind, items in by_kind.items():
                sample = items[0] if kind != first.invariant else (items[1] if len(items) > 1 else None)
                if sample is None:
                    continue
                lines.append(f"  {kind} x{len(items)}, first at {sample.where}, {sample.operation}: {sample.detail}.")
        return "\n".join(lines)


@contextlib.contextmanager
def working_in(path: str) -> Iterator[None]:
    """Learner code runs in ``path``: its current folder, and a file system apart from the system temp
    folder (a move between the two is refused with EXDEV, as on a usual machine: see
    :func:`grader.engine.recorder.temp_folder_apart`)."""
    old = os.getcwd()
    os.chdir(path)
    try:
        with temp_folder_apart(path):
            yield
    finally:
        os.chdir(old)


def record_run(run: Callable, scenario: Scenario, workdir: str, directory: str, *,
               timeout: Optional[float] = LOOP_TIMEOUT,
               before: Optional[Callable[[str], None]] = None) -> tuple[Recorder, Any, Optional[str], Any]:
    """Run ``run`` once under a recorder in ``workdir``. Returns (recorder, returned, error, tools)."""
    model, tools = scenario.model(), scenario.executor()
    # namespaces: a submission's own `from os import replace` is recorded too, not just reported.
    recorder = Recorder(watch=[workdir], namespaces=namespaces_of(run))

    # Calls from a loop's own threads go one at a time, in a fixed order (see grader.engine.turnstile).
    turnstile = Turnstile()

    def call_model(**kwargs: Any) -> dict:
        def call() -> dict:
            n = model.calls + 1
            recorder.event("model_start", n)
            response = model(**kwargs)
            recorder.event("model_end", (n, clone(response)))
            return response
        return turnstile(("model", len(kwargs.get("messages") or ())), call)

    def execute_tool(name: str, tool_input: Any) -> str:
        def call() -> str:
            recorder.event("tool_start", (name, clone(tool_input)))
            result = tools(name, tool_input)
            recorder.event("tool_end", (name, result))
            return result
        return turnstile(("tool", name, tool_input), call)

    returned, error = None, None
    with working_in(workdir):
        if before is not None:
            before(directory)
        try:
            with time_limit(timeout, owner=run), recorder:
                recorder.event("run_start")
                returned = run(scenario.task, copy.deepcopy(scenario.tools), call_model, execute_tool, directory)
                recorder.event("run_end")
        except LoopTimeout as exc:
            error = str(exc)
        except BaseException as exc:  # noqa: BLE001 - a student's loop may raise anything; report it
            if isinstance(exc, KeyboardInterrupt):
                raise
            error = short_traceback(exc)
    return recorder, returned, error, tools


# An exception raised in another process (the grading sandbox) carries the learner's own frames,
# formatted there, under this attribute: the frames here would be the kit's.
REMOTE_FRAMES = "crashcourse_frames"


# The kernel's words for EXDEV, in every error a move between two file systems raises.
CROSS_DEVICE = os.strerror(errno.EXDEV)
CROSS_DEVICE_STORY = (
    "Why: the file was moved between the system temp folder (where tempfile puts files unless given dir=; "
    "/tmp on Linux) and your checkpoint folder. On most machines, and in the grader's box, /tmp is a file "
    "system of its own, and a rename cannot move a file from one file system to another: the operating "
    "system refuses with EXDEV (\"Invalid cross-device link\"). Where this machine keeps both on one file "
    "system, the kit refuses the rename the same way, so your code meets here what it would meet elsewhere. "
    "Make the temp file in the checkpoint's own folder: pass dir=directory to tempfile.mkstemp or "
    "NamedTemporaryFile, or build its path with os.path.join(directory, ...).")


def crossed_file_systems(exc_or_text: Any) -> bool:
    """Whether an exception (or its text) is a rename or link refused between two file systems (EXDEV)."""
    if isinstance(exc_or_text, OSError) and exc_or_text.errno == errno.EXDEV:
        return True
    return f"[Errno {errno.EXDEV}] {CROSS_DEVICE}" in str(exc_or_text)


def short_traceback(exc: BaseException) -> str:
    """The exception and the learner's frames it came through (never the kit's own); for a move refused
    between two file systems, why (:data:`CROSS_DEVICE_STORY`)."""
    remote = getattr(exc, REMOTE_FRAMES, None)
    if isinstance(remote, str):
        where = remote
    else:
        frames = traceback.extract_tb(exc.__traceback__)
        keep = [f for f in frames if os.sep + "grader" + os.sep not in f.filename]
        where = "".join(traceback.format_list(keep[-3:]))
    message = str(exc)
    if isinstance(remote, str) and where.strip() and message.endswith("]") and " [" in message:
        message = message[:message.rindex(" [")]  # the frames below say where, in full
    story = f"\n{CROSS_DEVICE_STORY}" if crossed_file_systems(exc) else ""
    return f"{type(exc).__name__}: {message}\n{where}".rstrip() + story


def windows_for(ops: list[Op], task: str, allow_initial: bool = True, saves: Optional[list] = None,
                points: Optional[Container[int]] = None) -> list[Window]:
    """For each crash point 0..len(ops), what the loop had done (see :class:`Window`).

    ``saves`` may pass in the trace's reference saves, already computed (a long run's are costly).
    ``points``, when given, are the only crash points whose windows are wanted (a long run checks
    a sample); the list holds None at the others.
    """
    responses = [op.payload[1] for op in ops if op.kind == "model_end"]
    results = [op.payload[1] for op in ops if op.kind == "tool_end"]
    if saves is None:
        saves = reference_saves(task, responses, results) if responses else []
    early = [snapshot(initial_state(task))] if allow_initial else []
    blocks_of = [tool_use_blocks(r.get("content")) for r in responses]
    tool_ids = [blocks[0]["id"] for blocks in blocks_of if blocks]
    tool_names = [blocks[0]["name"] for blocks in blocks_of if blocks]
    spent = list(itertools.accumulate(map(spend, responses), initial=0))

    kinds = _SaveKinds(early, [s for label, s in saves if label == "A"], [s for label, s in saves if label == "B"],
                       [s for label, s in saves if label == "final"], saves, tool_names, blocks_of)
    windows = []
    m = s = e = ms = 0
    ended = False
    # Windows at the same turn share one list of responses and one of started ids (read them, never
    # change them): a long run has thousands of crash points and only a few hundred distinct lists.
    got_by_m: dict = {}
    started_by_s: dict = {}
    for k in range(len(ops) + 1):
        if k:
            kind = ops[k - 1].kind
            m += kind == "model_end"
            s += kind == "tool_start"
            e += kind == "tool_end"
            ms += kind == "model_start"
            ended = ended or kind == "run_end"
        if points is not None and k not in points:
            windows.append(None)
            continue
        got = got_by_m.get(m)
        if got is None:
            got = got_by_m[m] = responses[:m]
        started = started_by_s.get(s)
        if started is None:
            started = started_by_s[s] = tool_ids[:s]
        common = dict(started=started, recorded_results=e, responses=got, spent=spent)
        windows.append(kinds.window(m, s, e, ms, ended, common))
    return windows


@dataclass
class _SaveKinds:
    """A run's reference saves by kind, and which of them a crash may find at each phase of the loop."""

    early: list      # the first state, when a file that early is allowed
    a: list          # each turn's save point A (a tool named, before it runs)
    b: list          # each turn's save point B (its result recorded)
    final: list      # the save after the model's final answer
    saves: list      # every (label, state), in order
    tool_names: list
    blocks_of: list  # the tool_use blocks of each response

    def before_save(self, turn_done: int) -> list:
        return [self.b[turn_done - 1]] if turn_done >= 1 and turn_done <= len(self.b) else self.early

    def window(self, m: int, s: int, e: int, ms: int, ended: bool, common: dict) -> Window:
        """The window after ``m`` model responses, ``s`` tool starts, ``e`` tool ends and ``ms`` model calls."""
        name = self.tool_names[max(s, m) - 1] if max(s, m) - 1 < len(self.tool_names) and max(s, m) >= 1 else ""
        if ended:
            # A loop that returned before the model's final answer has no final save: the last save
            # it would have made where its run stopped is what a crash after the return may find.
            return Window("done", m, self.final[:1] or [state for _, state in self.saves[-1:]], False, **common)
        if m == 0:
            return Window("before-first-response", 0, list(self.early), True, **common)
        if ms > m:
            return Window("model", m, [self.b[e - 1]] if 0 < e <= len(self.b) else self.early, e == 0, fresh=True,
                          tool_name=self.tool_names[e - 1] if e else "", **common)
        if not self.blocks_of[m - 1]:
            return Window("final", m, self.before_save(e) + self.final[:1], e == 0, **common)
        if s < m:
            return Window("A", m, self.before_save(e) + ([self.a[m - 1]] if m <= len(self.a) else []), e == 0,
                          tool_name=name, **common)
        if e < s:
            return Window("tool", s, [self.a[s - 1]] if s <= len(self.a) else [], False, tool_name=name, **common)
        return Window("B", e, ([self.a[e - 1]] if e <= len(self.a) else []) +
                      ([self.b[e - 1]] if e <= len(self.b) else []), False, tool_name=name, **common)


def _renamed_since_open(ops: list[Op], index: int) -> Optional[Op]:
    """The rename that gave the file ``ops[index]`` writes to (through a handle opened earlier) a new
    name before that operation, or None: the recorder names a handle's file by the path it was opened at."""
    op = ops[index]
    if op.kind not in ("write", "flush", "fsync", "close", "truncate") or op.handle is None or op.is_dir:
        return None
    for earlier in reversed(ops[:index]):
        if earlier.kind == "open" and earlier.handle == op.handle:
            return None
        if earlier.kind == "rename" and earlier.path == op.path:
            return earlier
    return None


def _describe_at(ops: list[Op], index: int) -> str:
    """``ops[index]`` in a learner's words, naming the file by the name it had at that moment."""
    op = ops[index]
    text = op.describe()
    rename = _renamed_since_open(ops, index)
    if rename is not None and rename.dest:
        text = text.replace(short_name(op.path), f"{short_name(rename.dest)} (opened as "
                            f"{os.path.basename(op.path)}, renamed before this)", 1)
    return text


def _operation_words(ops: list[Op], state: CrashState) -> str:
    if state.torn is not None:
        return f"in the middle of {_describe_at(ops, state.point)} ({state.torn[0]:,} of {state.torn[1]:,} bytes landed)"
    if state.point == 0:
        return "before anything happened"
    return "after " + _describe_at(ops, state.point - 1)


def _power_cut_words(ops: list[Op], point: int, target: str, raw: bytes) -> str:
    """Why a power cut left ``target`` empty or short at crash point ``point``, read from the trace: the
    rename that named it landed, the bytes written into it under its temp name had not been fsynced
    (or "" when the trace shows something else)."""
    renames = [i for i in range(min(point, len(ops))) if ops[i].kind == "rename" and ops[i].dest == target]
    if not renames:
        return ""
    at = renames[-1]
    source = ops[at].path
    opened = next((i for i in range(at - 1, -1, -1) if ops[i].kind == "open" and ops[i].path == source), None)
    if opened is None:
        return ""
    between = ops[opened:at]
    written = sum(len(op.data) for op in between if op.kind == "write" and op.path == source)
    syncs = [k for k, op in enumerate(between) if op.kind == "fsync" and op.path == source]
    unsynced = sum(len(op.data) for op in between[syncs[-1] + 1 if syncs else 0:]
                   if op.kind == "write" and op.path == source)
    if not unsynced or len(raw) >= written:
        return ""
    name = os.path.basename(source)
    have = "holds 0 bytes" if not raw else f"holds only {len(raw):,} of the {written:,} bytes written into it"
    # The trace shows when bytes reached the OS, not whether they sat in Python's buffer at the fsync
    # or were written after it: the words name both.
    why = (f"{unsynced:,} of the bytes written into {name} reached the operating system only after its last "
           "fsync (written after it, or still in Python's buffer when it ran), so they never reached the disk"
           if syncs else f"the data written into {name} had not been fsynced before the rename")
    return (f"checkpoint.json {have}: the rename from {name} reached the disk, but {why}; the power cut lost "
            + ("all of it" if not raw else "the rest"))


def _saved_while_tool_ran(ops: list[Op], point: int, target: str) -> Optional[Op]:
    """The operation that put ``target`` in place after the tool running at ``point`` had started and
    before it returned (a save point A still running in a thread), or None."""
    start = next((op.index for op in reversed(ops[:point]) if op.kind == "tool_start"), None)
    if start is None:
        return None
    # Between the tool's start and the next model call a loop saves once (save point B); a save A
    # that was not waited for lands in there too, before it.
    landed = []
    for op in ops[start:]:
        if op.kind == "model_start":
            break
        if op.kind in ("rename", "link") and _puts_in_place(op.dest, target) \
                or op.kind == "open" and op.path == target and "trunc" in op.flags:
            landed.append(op)
    return landed[0] if len(landed) > 1 else None


_KERNEL_COPIES = ("sendfile", "copy_file_range")  # how shutil copies a file on Linux (the recorder's api or the kernel's)


def _copied_in(ops: list[Op], opened: Op, folder: str) -> Optional[str]:
    """The file outside ``folder`` that the file ``opened`` was filled from and that was then removed
    (shutil.move's copy and delete, when a rename cannot cross file systems), or None."""
    copied = False
    for op in ops[opened.index + 1:]:
        if op.kind == "write" and op.handle == opened.handle:
            if not op.api.endswith(_KERNEL_COPIES):
                return None
            copied = True
        elif op.kind == "unlink" and op.path and os.path.dirname(op.path) != folder:
            return op.path if copied else None
        elif op.kind in ("model_start", "tool_start", "run_end"):
            return None
    return None


def _trace_cause(ops: list[Op], point: int, target: str, raw: Optional[bytes]) -> tuple[str, str]:
    """Why the checkpoint is missing or unreadable at crash point ``point``, read from what this loop did
    (cause, words to add), or ("", "") when the trace shows nothing particular.

    A folder swap caught between its two renames comes first; otherwise the last call that changed the
    checkpoint's name or emptied it says which (:data:`_LAST_CALL_CAUSES`).
    """
    done = ops[:point]
    swapped = _folder_swap(ops, point, os.path.dirname(target)) if raw is None else None
    if swapped is not None:
        return swapped
    last = next((op for op in reversed(done) if target in (op.path, op.dest) and op.kind in _LAST_CALL_CAUSES), None)
    if last is None:
        return "", ""
    if last.kind == "rename" and last.path == target and last.dest != target:
        return _moved_away(ops, point, last, raw)
    return _LAST_CALL_CAUSES[last.kind](ops, point, last, raw)


def _folder_swap(ops: list[Op], point: int, folder: str) -> Optional[tuple[str, str]]:
    """The checkpoint folder itself renamed out of the way, and the crash before its new one came in."""
    moved = next((op for op in reversed(ops[:point]) if op.kind == "rename" and folder in (op.path, op.dest)), None)
    if moved is None or moved.path != folder:
        return None
    back = next((op for op in ops[point:] if op.kind == "rename" and op.dest == folder), None)
    return "folder-swap", (f"This save had just moved the checkpoint folder itself out of the way ({moved.describe()})"
                           + (f", and the crash came before {short_name(back.path)} was renamed in its place"
                              if back else "")
                           + ": between the two renames of a folder swap there is no checkpoint folder at all")


def _deleted_first(ops: list[Op], point: int, last: Op, raw: Optional[bytes]) -> tuple[str, str]:
    if raw is not None:
        return "", ""
    temp = next((op.path for op in ops[point:] if op.kind == "rename" and op.dest == last.path), None)
    return "deleted-first", (f"This save had just deleted checkpoint.json ({last.api}), and the crash came before "
                             + (f"{os.path.basename(temp)} was renamed in" if temp else "a new file took its place")
                             + ", so at that moment there was no checkpoint at all")


def _buffered_rename(ops: list[Op], point: int, last: Op, raw: Optional[bytes]) -> tuple[str, str]:
    late = [op for op in ops[last.index + 1:] if op.kind == "write" and op.path == last.path
            and _renamed_since_open(ops, op.index) is last]
    if not late:
        return _emptied_before_rename(ops, last, raw)
    size = sum(len(op.data) for op in late)
    return "buffered-rename", (f"This save's {last.api} renamed {os.path.basename(last.path)} over "
                               f"checkpoint.json while "
                               f"its {size} bytes were still in Python's buffer: the `with` block had not "
                               "closed (and so flushed) the file yet, so the bytes reached it only after "
                               "the rename")


def _emptied_before_rename(ops: list[Op], rename: Op, raw: Optional[bytes]) -> tuple[str, str]:
    """An empty checkpoint whose temp file had been written and then emptied by this save itself (opened
    again with "w", or truncated) before the rename: no crash is needed for the file to be empty."""
    if raw != b"":
        return "", ""
    written = emptied = None
    for op in reversed(ops[:rename.index]):
        if op.path != rename.path or op.kind in ("run_end", "model_start", "tool_start"):
            continue
        if op.kind == "write" and op.data:
            written = op
            break
        if emptied is None and (op.kind == "truncate" and op.size == 0 or op.kind == "open" and "trunc" in op.flags):
            emptied = op
    if written is None or emptied is None or emptied.index < written.index:
        return "", ""
    return "emptied-before-rename", (f"This save wrote {os.path.basename(rename.path)}, then emptied it again "
                                     f"({emptied.describe()}) before {rename.api} gave it the checkpoint's name: "
                                     "checkpoint.json is empty after this save even when nothing crashes")


def _opened_in_place(ops: list[Op], point: int, last: Op, raw: Optional[bytes]) -> tuple[str, str]:
    if raw is None:  # (an open names the checkpoint by its path: it has no second name)
        return "", ""
    source = _copied_in(ops, last, os.path.dirname(last.path))
    if source is not None:
        return "temp-copied", (f"This save copied its temp file from {os.path.dirname(source)} into checkpoint.json "
                               "and then deleted it, which is what shutil.move does when a rename cannot cross file "
                               "systems (from the system temp folder, say): opening checkpoint.json for the copy "
                               "emptied the last save, and the copied bytes had not all landed")
    return "in-place", ("This save writes checkpoint.json itself: opening it for writing emptied the last save, "
                        "and the new bytes had not all landed")


def _moved_away(ops: list[Op], point: int, last: Op, raw: Optional[bytes]) -> tuple[str, str]:
    """A rename that took checkpoint.json's name away (to a backup, say): a moment with none, as a delete leaves."""
    if raw is not None:
        return "", ""
    temp = next((op.path for op in ops[point:] if op.kind == "rename" and op.dest == last.path), None)
    return "deleted-first", (f"This save had just moved checkpoint.json out of the way ({last.describe()}), and the "
                             "crash came before "
                             + (f"{os.path.basename(temp)} was renamed in" if temp else "a new file took its place")
                             + ", so at that moment there was no checkpoint at all")


# The cause a crash shows, by the last call that named the checkpoint before it.
_LAST_CALL_CAUSES = {"unlink": _deleted_first, "rename": _buffered_rename, "open": _opened_in_place}


def explore_loop(run: Callable, scenario: Scenario, *, models: Iterable[str] = ("M1", "M2"),
                 directory: str = "checkpoints", timeout: Optional[float] = 20, workdir: Optional[str] = None,
                 max_violations: int = 200, before: Optional[Callable[[str], None]] = None,
                 rerun: bool = False, scratch: Optional[str] = None, **plug: Any) -> Exploration:
    """Run ``run`` on ``scenario`` once, then check every crash state under ``models``.

    ``scratch`` is where the temp folders of the run (and of second runs) are made: tempfile's
    choice unless given (see :func:`scratch_root`).

    ``plug`` holds :func:`check_trace`'s optional keywords (``windows``, ``checker``, ``reader``,
    ``sample``, ``same``), which levels with another protocol use to judge the same trace. With
    ``rerun``, each distinct crash state that leaves leftovers is also the starting folder of a
    second run (see :func:`rerun_after_crashes`).
    """
    started = time.perf_counter()
    with recorded_run(run, scenario, models, directory=directory, timeout=timeout, workdir=workdir,
                      before=before, scratch=scratch) as (result, recorder, directory):
        workdir, error = result.workdir, result.error
        try:
            with open(os.path.join(workdir, directory, CHECKPOINT_NAME), "rb") as left:
                result.final_file = left.read()
        except OSError:
            pass
        # A trace with holes (result.unseen) gives no verdict: the crash states rebuilt from it
        # would blame the learner for operations the recorder simply did not see.
        if error is None and not result.unseen:
            ckpt_dir = os.path.join(workdir, directory)
            try:
                check_trace(result, recorder, ckpt_dir, scenario, max_violations, **plug)
                if rerun and not result.violations and result.error is None:
                    def check(again: Exploration, rec: Recorder, folder: str, skip: Callable) -> None:
                        check_trace(again, rec, folder, scenario, max_violations, skip=skip, **plug)
                    rerun_after_crashes(result, recorder, run, scenario, ckpt_dir, directory, check, timeout=timeout,
                                        before=before, reader=plug.get("reader"), scratch=scratch)
            except LoopTimeout as exc:  # the learner's loader (level 6), reading a crash state back
                result.error, result.stuck = str(exc), exc.hang
                result.violations = []
            except layout.UnsafeName as exc:  # a crash state that names a file outside its folder
                result.error, result.violations = str(exc), []
    result.seconds = time.perf_counter() - started
    return result


@contextlib.contextmanager
def recorded_run(run: Callable, scenario: Scenario, models: Iterable[str], *, directory: str,
                 timeout: Optional[float], workdir: Optional[str] = None,
                 before: Optional[Callable[[str], None]] = None, scratch: Optional[str] = None
                 ) -> Iterator[tuple[Exploration, Recorder, str]]:
    """Run the loop once under the recorder, in ``workdir`` or a temporary folder (in ``scratch``) that
    lasts as long as the ``with`` block. Yields ``(exploration so far, recorder, the directory the loop
    was given)``."""
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="crashcourse-", dir=scratch))
        workdir = os.path.realpath(workdir)
        directory = folder_in(workdir, directory)
        mark = hang_mark()
        recorder, returned, error, _ = record_run(run, scenario, workdir, directory, timeout=timeout, before=before)
        stuck = next((hang for _, hang in hangs_since(mark)), None)
        yield (Exploration(scenario.name, tuple(models), ops=recorder.ops,
                           unseen=list(dict.fromkeys(recorder.unseen)), error=error, returned=returned,
                           folder=os.path.join(workdir, directory), workdir=workdir, stuck=stuck),
               recorder, directory)


RERUNS = 4  # at most this many second runs per exploration: one per kind of leftover, the largest of each


def leftover_states(ops: list, initial: dict, initial_dirs: Iterable[str], ckpt_dir: str) -> list:
    """The crash states (M1, and M2 with any file torn) that leave files besides checkpoint.json.

    Distinct leftovers only: states are grouped by the names they leave and, for each group, the
    one with the most leftover bytes is kept (a long torn temp file is what a save that does not
    truncate trips over). At most :data:`RERUNS`, earliest group first.
    """
    groups: dict = {}
    for state in crash_models.crash_states(ops, initial, ckpt_dir, CHECKPOINT_NAME, ("M1", "M2"), initial_dirs):
        extra = state.leftovers
        if not extra:
            continue
        key = tuple(sorted(extra))
        size = sum(map(len, extra.values()))
        if key not in groups or size > groups[key][0]:
            groups[key] = (size, state)
    return [state for _, state in list(groups.values())[:RERUNS]]


def rerun_after_crashes(result: Exploration, recorder: Recorder, run: Callable, scenario: Scenario, ckpt_dir: str,
                        directory: str, check: Callable, *, timeout: Optional[float] = 20,
                        before: Optional[Callable[[str], None]] = None, reader: Optional[Callable] = None,
                        windows: Optional[list] = None, scratch: Optional[str] = None) -> None:
    """Crash, then run again: start ``run`` a second time in each folder a crash left with leftovers.

    The second run's own crash states are checked with ``check`` (the level's rules), except those
    where the checkpoint still reads as it did before the second run began (the first run's file is
    a fine thing to find until the new run replaces it). A second run that fails, or leaves a state
    that breaks a rule, is a RERUN violation naming the first crash and what it left.
    """
    ops = result.ops
    windows = windows if windows is not None else windows_for(ops, scenario.task)
    relative = os.path.relpath(ckpt_dir, result.workdir)
    for state in leftover_states(ops, recorder.initial, recorder.initial_dirs, ckpt_dir):
        with tempfile.TemporaryDirectory(prefix="crashcourse-rerun-", dir=scratch) as again_dir:
            again_dir = os.path.realpath(again_dir)
            folder_arg = directory if not os.path.isabs(directory) else os.path.join(again_dir, relative)

            mark = hang_mark()
            # A second run is a new process after the crash: it starts from what a fresh import of the
            # learner's file holds (a counter that names temp files starts again at 0 there), never
            # from what the first run left in memory (grader.engine.fresh).
            # Names from the run are checked here, before any process lays them out: a refusal is the
            # exploration's error (a broken run), not something the second run did.
            layout.check_names(state.files, state.dirs)
            try:
                rec, _returned, error = fresh.run_fresh(_second_run, run, scenario, again_dir, folder_arg, timeout,
                                                        dict(state.files), tuple(state.dirs), before, timeout=timeout)
            except fresh.FreshProcessDied as exc:
                rec, _returned, error = RecordedRun(), None, f"SystemExit: it ended the process it ran in ({exc})"
            stuck = next((hang for _, hang in hangs_since(mark)), None)
            folder = os.path.join(again_dir, folder_arg)
            found = ""
            if rec.unseen and error is None and stuck is None:
                continue  # the first run's trace was whole; a hole now is reported by the first exploration's kind
            # A second run that stopped is told as stopped, whatever its recording lacks: a run cut off
            # (its process killed, say) leaves a folder its partial trace may not rebuild, and how much of
            # the trace came in before the stop depends on the machine's load, never on the code.
            if stuck is not None:
                found = (f"the second run got stuck at {stuck.place}" if stuck.place else
                         f"the second run got stuck in {stuck.function}") + f" and was stopped after {stuck.seconds:g} s"
            elif error is not None:
                found = f"the second run stopped with {error.splitlines()[0]}"
            else:
                # The second run is judged under the first one's models (M1, M2 where the level uses it).
                again = Exploration(scenario.name, tuple(m for m in result.models if m in ("M1", "M2")) or ("M1",),
                                    ops=rec.ops, returned=_returned, folder=folder, workdir=again_dir)
                start = crash_models.CrashState(0, "M1", dict(state.files), dirs=state.dirs)
                before_bytes = reader(start) if reader is not None else state.read(CHECKPOINT_NAME)
                check(again, rec, folder, lambda raw, before=before_bytes: raw == before)
                if again.error is not None:
                    found = f"the second run {again.error}"
                elif again.violations:
                    v = again.violations[0]
                    found = (f"{v.where}, {v.operation}, the second run broke {v.invariant}: {v.detail}"
                             + ("; on disk then: " + "; ".join(f"{n}: {describe_bytes(d)}" for n, d in
                                                               sorted(v.files.items())) if v.files else ""))
            if not found:
                continue
            names = ", ".join(sorted(state.leftovers))
            advice = ("A save must not count on an empty folder: empty a temp file as you open it (\"w\" mode, or "
                      "O_TRUNC) rather than append to it or require it to be new (\"x\"), and never let a new run's "
                      "saves read or extend files an earlier run left")
            if "but not in their order" in found:
                # Not a leftover temp file: the second run's saves, read back in another order than written.
                advice = ("Here the second run's saves were read back in another order than they were written: "
                          "order what you read back by its number, not by its name as a string")
            result.violations.append(Violation(
                "RERUN", state.model, state.point, windows[state.point].words(), _operation_words(ops, state),
                dict(state.files),
                f"this crash left {names} behind; the loop was then run again in that folder, and {found}",
                "the next run in this folder trips over what the crash left, and so will every run after it until "
                "someone cleans the folder by hand. " + advice))
            return  # one leftover that breaks the second run is the lesson; more would repeat it



@dataclass
class RecordedRun:
    """What a recorder saw of one run, as plain data (a second run made in a fresh process sends it back)."""

    ops: list = field(default_factory=list)
    unseen: list = field(default_factory=list)
    initial: dict = field(default_factory=dict)
    initial_dirs: set = field(default_factory=set)
    watch: list = field(default_factory=list)


def _second_run(run: Callable, scenario: Scenario, again_dir: str, folder_arg: str, timeout: Optional[float],
                files: dict, dirs: tuple, before: Optional[Callable[[str], None]]) -> tuple:
    """Lay out the folder a crash left and run the loop there once: ``(RecordedRun, returned, error)``."""

    def lay_out(folder: str) -> None:
        if before is not None:
            before(folder)
        # Names from the run: laid out only as plain names inside the folder (grader.engine.layout).
        layout.lay_out(folder, files, dirs, within=again_dir)

    rec, returned, error, _ = record_run(run, scenario, again_dir, folder_arg, timeout=timeout, before=lay_out)
    if fresh.served_here():
        try:
            pickle.dumps(returned)
        except Exception:  # noqa: BLE001 - an object of the learner's own class: only its name can travel
            returned = f"<{type(returned).__name__}>"
    return RecordedRun(list(rec.ops), list(rec.unseen), dict(rec.initial), set(rec.initial_dirs),
                       list(rec.watch)), returned, error


_VERDICTS: dict = {}


def shared_verdicts(ops: list[Op], task: str) -> Optional[dict]:
    """The verdict cache for runs that received exactly these model responses and tool results.

    With the default rules a verdict depends only on the checkpoint's bytes and the window, and
    a window is fixed by its signature once the conversation is (see :func:`windows_for`). So
    runs of the same conversation can share verdicts: ``crashcourse grade`` fills this with the
    kit's solution before it forks its judges, and a student whose saves write the same bytes
    is checked by lookup.
    """
    responses = [op.payload[1] for op in ops if op.kind == "model_end"]
    results = [op.payload[1] for op in ops if op.kind == "tool_end"]
    try:
        key = hashlib.blake2b(pickle.dumps((task, responses, results), protocol=pickle.HIGHEST_PROTOCOL)).digest()
    except Exception:  # noqa: BLE001 - something pickle cannot carry: no sharing
        return None
    if key not in _VERDICTS and len(_VERDICTS) >= 64:
        _VERDICTS.clear()
    return _VERDICTS.setdefault(key, {})


def _puts_in_place(dest: Optional[str], target: str) -> bool:
    """A rename or link that can put ``target`` in place: onto it, or onto a folder above it (a first
    save may build the checkpoint folder beside where it belongs and rename the whole folder in)."""
    return bool(dest) and (dest == target or target.startswith(dest + os.sep))


def check_trace(result: Exploration, recorder: Recorder, ckpt_dir: str, scenario: Scenario,
                max_violations: int = 200, *, windows: Optional[Callable] = None, checker: Optional[Callable] = None,
                reader: Optional[Callable] = None, sample: Optional[Callable[[list], Any]] = None,
                same: Optional[Callable[[Any, Any], bool]] = None,
                skip: Optional[Callable[[Any], bool]] = None) -> None:
    """Check each crash state of the trace against its window.

    The keywords let a level judge the trace by its own rules: ``windows(ops, task)`` in place of
    :func:`windows_for`, ``checker(raw, window, parsed)`` in place of :func:`~grader.engine.invariants.check`,
    ``reader(state)`` to turn a crash state's files into what the checker reads (then the loop need
    not write checkpoint.json itself), ``sample(ops)`` returning the crash points to check (a long
    run may check a subset),
    ``same(got, want)`` to compare the state run_agent returned with the protocol's final state, and
    ``skip(raw)`` true for what needs no check (a second run finding the first run's file).
    """
    ops = recorder.ops
    default_rules = windows is None and checker is None and reader is None
    chosen = None if sample is None else set(sample(ops))
    if chosen is None:
        windows = (windows or windows_for)(ops, scenario.task)
    else:  # a sampled run builds only the windows it reads: the chosen points, renames, the end
        needed = chosen | {len(ops)} | {op.index for op in ops if op.kind in ("rename", "link")}
        windows = (windows or windows_for)(ops, scenario.task, points=needed)
    checker = checker or check
    target = os.path.join(ckpt_dir, CHECKPOINT_NAME)
    if reader is None and _never_wrote(result, recorder, ckpt_dir, target):
        return
    _renamed_from_elsewhere(result, ops, windows, ckpt_dir, target)
    # Verdicts for the protocol's own rules are shared by every run of the same conversation (see
    # shared_verdicts); a level with its own rules keeps them to this run.
    cache = shared_verdicts(ops, scenario.task) if default_rules else None
    if cache is None:
        cache = {}
    parsed: dict = {}
    points = set()
    states = crash_models.crash_states(ops, recorder.initial, ckpt_dir, CHECKPOINT_NAME, result.models,
                                       recorder.initial_dirs,
                                       tear_only=(CHECKPOINT_NAME,) if reader is None else None, points=chosen,
                                       line_cuts=reader is not None)
    for state, raw in _read_each(states, reader):
        result.states += 1
        tally = result.by_model.setdefault(state.model, [0, 0])
        tally[0] += 1
        points.add(state.point)
        if skip is not None and skip(raw):
            continue
        window = windows[state.point]
        key = (window.signature(), raw)
        if key in cache:
            finding = cache[key]
        else:
            finding = cache[key] = checker(raw, window, parsed)
        if finding is None:
            continue
        tally[1] += 1
        invariant = "DURABLE" if state.model in POWER_MODELS else finding.invariant
        if len(result.violations) >= max_violations:
            result.over_cap[invariant] = result.over_cap.get(invariant, 0) + 1
            continue
        result.violations.append(_violation(ops, state, window, finding, invariant, raw, target, reader is None))
    result.points = len(points)
    if result.violations:
        _explain_links(result, recorder)
    if result.returned is not None and not result.violations:
        _check_returned(result, windows, len(ops), same)


def _read_each(states: Iterable, reader: Optional[Callable]) -> Iterator[tuple]:
    """``(state, what the checker reads)`` for each crash state: checkpoint.json's bytes, or what
    ``reader`` makes of the state (a reader with an ``each`` reads several at once, in order)."""
    if reader is None:
        return ((state, state.read(CHECKPOINT_NAME)) for state in states)
    each = getattr(reader, "each", None)
    return each(states) if callable(each) else ((state, reader(state)) for state in states)


def _never_wrote(result: Exploration, recorder: Recorder, ckpt_dir: str, target: str) -> bool:
    """When the run never wrote the checkpoint where it was told to, say so as the run's error (True)."""
    ops = recorder.ops
    if any(op.kind in ("rename", "link") and _puts_in_place(op.dest, target) or op.path == target
           for op in ops if op.kind != "model_end"):
        return False
    turns = sum(1 for op in ops if op.kind == "tool_start")
    if not any(op.kind in ("open", "write", "rename", "link") for op in ops):
        # Nothing was written anywhere: the loop never saved, rather than saving somewhere else.
        result.error = (f"run_agent returned without saving anything: in this conversation the model asked for "
                        f"{turns or 'no'} tool{'s' if turns > 1 else ''}, and no {CHECKPOINT_NAME} was ever written. "
                        + ("With no tool call, the only save left is the one after the model's final answer."
                           if not turns else "Which save points does this loop reach?"))
        return True
    workdir = os.path.dirname(os.path.dirname(ckpt_dir))
    for root in recorder.watch:
        if ckpt_dir.startswith(root + os.sep):
            workdir = root
    given = os.path.relpath(ckpt_dir, workdir) if not ckpt_dir.startswith(os.path.join(workdir, "elsewhere")) \
        else ckpt_dir
    result.error = (f"run_agent finished but never wrote {CHECKPOINT_NAME} in the directory it was given "
                    f"({given!r}).{written_elsewhere(ops, ckpt_dir, workdir)}")
    return True


def _renamed_from_elsewhere(result: Exploration, ops: list, windows: list, ckpt_dir: str, target: str) -> None:
    """ATOMIC-DIR, once, for a temp file renamed in from another folder."""
    for op in ops:
        # A temp folder inside the checkpoint's own folder is on the same file system: renaming out of it is fine.
        if op.kind == "rename" and op.dest == target and not op.path.startswith(ckpt_dir + os.sep):
            w = windows[op.index]
            result.violations.append(Violation(
                "ATOMIC-DIR", "M1", op.index, w.words(), "at " + op.describe(), {},
                f"the temp file was written in {os.path.dirname(op.path)}, not next to checkpoint.json; a rename "
                "between two file systems is a copy followed by a delete, which a crash can tear",
                "on a machine where that folder is another file system, the same crash tears the file",
                cause="temp-elsewhere"))
            return
        # A move from another file system copies into checkpoint.json (see _copied_in).
        source = _copied_in(ops, op, ckpt_dir) if op.kind == "open" and op.path == target else None
        if source is not None and windows[op.index] is not None:
            w = windows[op.index]
            result.violations.append(Violation(
                "ATOMIC-DIR", "M1", op.index, w.words(), "at " + op.describe(), {},
                f"the temp file was written in {os.path.dirname(source)}, not next to checkpoint.json, and was "
                "copied into checkpoint.json itself, then deleted (shutil.move copies when a rename cannot cross file "
                "systems, as from the system temp folder)",
                "a crash during the copy leaves checkpoint.json part old, part new, or empty", cause="temp-copied"))
            return


def _violation(ops: list, state: Any, window: Any, finding: Finding, invariant: str, raw: Optional[bytes],
               target: str, own_file: bool) -> Violation:
    """The violation a crash state's finding makes, in the words of what the crash did (``own_file``:
    the checkpoint is checkpoint.json itself, not what a level's reader made of the files)."""
    # Under a power cut, the rule the file left breaks is named in words: the headline is DURABLE.
    detail = finding.detail
    if invariant != finding.invariant and finding.blames and detail.endswith(finding.blames):
        # The loop did make the later save; the power cut undid it, because it was not yet durable.
        detail = (detail[:-len(finding.blames)] + ". A later save had been made, but the power cut undid it: "
                  "what that save changed had reached the operating system, not yet the disk")
    if invariant != finding.invariant:
        detail = f"the file the power cut left breaks {finding.invariant}: {detail}"
    # Under a power cut the file shows what was never fsynced, not which save the loop skipped.
    cause = finding.cause if invariant == finding.invariant else ""
    if not cause and invariant == finding.invariant and own_file and (raw is None or finding.invariant == "PARSE"):
        traced, words = _trace_cause(ops, state.point + (state.torn is not None), target, raw)
        if traced:
            cause, detail = traced, f"{detail}. {words}"
    if cause in ("", "no-save-a") and invariant == finding.invariant == "TRACE" and own_file:
        late = _saved_while_tool_ran(ops, state.point, target)
        if late is not None:
            cause = "save-a-late"
            # Saved after execute_tool, or in a thread joined late: the trace shows the same order, so
            # the words name both (the thread's race with the tool among them).
            detail = (f"{detail}. Save point A reached the disk only after `{window.tool_name}` had started "
                      f"({late.describe()}): a save made after the tool is called, or one that runs in a thread "
                      "nothing waits for (which races the tool), lands too late, and a crash before it lands "
                      "finds no trace of the call")
    elif invariant != finding.invariant and finding.invariant == "PARSE" and raw is not None and own_file:
        # The generic words ("before any bytes reached it") are not what a power cut did.
        words = _power_cut_words(ops, state.point, target, raw)
        if words:
            detail = f"the file the power cut left breaks PARSE: {words}"
    if state.note:  # what the crash model knows and the file cannot show (a folder that vanished)
        detail = f"{detail}; {state.note}"
    return Violation(invariant, state.model, state.point, window.words(), _operation_words(ops, state),
                     dict(state.files), detail, finding.resume, cause=cause)


def _check_returned(result: Exploration, windows: list, end: int, same: Optional[Callable[[Any, Any], bool]]) -> None:
    """WHOLE, with no crash at all, when run_agent returned another state than the protocol's loop ends with."""
    final = windows[-1].allowed
    try:
        got = (exactly_saved(result.returned, final[0]) if final else None) or snapshot(result.returned)
    except (KeyError, TypeError, ValueError):
        got = None
    if final and not (same(got, final[0]) if same is not None and got is not None else got == final[0]):
        result.violations.append(Violation(
            "WHOLE", "none", end, "after run_agent returned", "with no crash at all", {},
            "run_agent returned a state that differs from the one the protocol's loop ends with",
            "a caller that reads the returned state sees the wrong conversation or counters"))


def _explain_links(result: Exploration, recorder: Recorder) -> None:
    """Name the hard link when a rename did nothing because both names were one file."""
    fs = crash_models.FileSystem(recorder.initial, recorder.initial_dirs)
    for op in result.ops:
        fs.apply(op)
        if fs.linked_renames:
            first = fs.linked_renames[0]
            v = result.violations[0]
            v.detail += (f"; note that {first.describe()} did nothing: both names were hard links to one file "
                         "(os.link made them so), so every write to the temp name went straight into "
                         f"{CHECKPOINT_NAME} itself, and opening the temp name with \"w\" emptied it")
            return


@dataclass
class FileCrashes:
    """The crash states of one file written by your own code (what :func:`explore_writes` finds)."""

    path: str
    before: Optional[bytes]
    after: Optional[bytes]
    ops: list
    states: list
    unseen: list

    @property
    def versions(self) -> list:
        """Each distinct content a crash could leave (None: the file is missing), in order of appearance."""
        seen: list = []
        for state in self.states:
            data = state.read(os.path.basename(self.path))
            if data not in seen:
                seen.append(data)
        return seen

    def failures(self, acceptable: Callable[[Optional[bytes]], bool]) -> list[str]:
        out = []
        for state in self.states:
            data = state.read(os.path.basename(self.path))
            if not acceptable(data):
                where = _operation_words(self.ops, state)
                shown = "missing" if data is None else describe_bytes(data)
                out.append(f"{state.model} ({MODEL_NAMES[state.model]}), {where}: {os.path.basename(self.path)} is {shown}")
        return out

    def assert_each(self, acceptable: Callable[[Optional[bytes]], bool], what: str = "acceptable") -> None:
        """Fail with every crash state whose file ``acceptable`` rejects."""
        if self.unseen:
            raise AssertionError("the recorder could not see every write, so no verdict is possible:\n  "
                                 + "\n  ".join(self.unseen[:5]))
        bad = self.failures(acceptable)
        if bad:
            raise AssertionError(f"{len(bad)} of {len(self.states)} crash states leave a file that is not {what}:\n  "
                                 + "\n  ".join(bad[:8]) + ("\n  ..." if len(bad) > 8 else ""))

    def assert_atomic(self) -> None:
        """Every crash leaves either the old file (or none, if there was none) or the new one, whole."""
        self.assert_each(lambda data: data in (self.before, self.after), "the old version or the new one, whole")


def explore_writes(fn: Callable[[], Any], path: Any, models: Iterable[str] = ("M1", "M2")) -> FileCrashes:
    """Run ``fn()`` under the recorder and rebuild ``path`` as every crash under ``models`` would leave it."""
    path = os.path.abspath(os.fspath(path))
    directory = os.path.dirname(path)
    before = None
    if os.path.exists(path):
        with open(path, "rb") as f:
            before = f.read()
    with Recorder(watch=[directory], namespaces=namespaces_of(fn)) as recorder:
        fn()
    after = None
    if os.path.exists(path):
        with open(path, "rb") as f:
            after = f.read()
    states = list(crash_models.crash_states(recorder.ops, recorder.initial, directory, os.path.basename(path),
                                            models, recorder.initial_dirs))
    return FileCrashes(path, before, after, recorder.ops, states, list(dict.fromkeys(recorder.unseen)))
