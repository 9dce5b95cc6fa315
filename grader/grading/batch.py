"""A batch of submissions graded: what ``crashcourse grade`` and the fleets' runners call.

:func:`grade_batch` grades every folder (or ``.zip``) in SUBMISSIONS with
the level's own tests, ``exercises/levelN/test_*.py``, exactly as a student's ``pytest
exercises/levelN`` would, but each submission in its own bubblewrap box (see
:mod:`grader.grading.bubblewrap`) and with the verdict computed outside it (see
:mod:`grader.grading.judge`). The command's arguments, messages and progress bar are the
instructor's face, :mod:`grader.faces.instructor_cli`.

How a batch runs: this process imports pytest, Hypothesis, the crash engine and the level's
tests once, then forks one judge per submission (up to ``--jobs`` at a time), so no judge pays
for Python's start-up again. Each judge starts one sandboxed worker for the student's code and
sends back its results as JSON on a pipe; this process writes the report.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import sys
import tempfile
import time
import uuid
import zipfile
from pathlib import Path
from typing import Optional

from grader.engine.fresh import usable_cores
from grader.grading import bubblewrap
from grader.grading import sandbox
from grader.grading import kernel_trace
from grader.levels.manifest import package_root

# The instructor's kit: a checkout, or the copy a wheel carries (never a student's workspace).
KIT_ROOT = package_root()
MAX_UNZIPPED = 100 * 1024 ** 2
MAX_FILES = 2000

# -- the level ---------------------------------------------------------------------------------------


def level_folder(level: int) -> Path:
    folder = KIT_ROOT / "exercises" / f"level{level}"
    if not folder.is_dir() or not list(folder.glob("test_*.py")):
        have = sorted(p.name for p in (KIT_ROOT / "exercises").glob("level*") if list(p.glob("test_*.py")))
        raise SystemExit(f"crashcourse grade: level {level} has no tests in {folder}. Levels with tests: "
                         f"{', '.join(have) or 'none'}.")
    return folder


class NoBox(RuntimeError):
    """Grading was asked for with a box, and no box starts here (the message says what to do)."""


# -- a batch ----------------------------------------------------------------------------------------

def discover(folder: str) -> list[tuple[str, Path]]:
    """``(student id, path)`` for each folder or .zip in ``folder``, sorted by id."""
    out = []
    for entry in sorted(Path(folder).iterdir()):
        if entry.name.startswith("."):
            continue
        # A name that is not UTF-8 would break every report: its odd bytes become U+FFFD in the id.
        name = entry.name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        if entry.is_dir() and not entry.is_symlink():
            out.append((name, entry))
        elif entry.is_file() and not entry.is_symlink() and entry.suffix.lower() == ".zip":
            out.append((name[:-4], entry))
    return out


def unique_ids(entries: list) -> tuple[list, list]:
    """``(entries to grade, refused results)``: submissions whose ids would collide are refused, each
    with a message naming the other, under ids of their own (their names as they are in the folder).

    Two ids collide when they are equal (``bob/`` and ``bob.zip``) or name the same Gradescope folder
    (``ann smith`` and ``ann_smith``): one would take the other's journal entry or results.json.
    """
    from grader.grading.reports import safe_folder_name
    groups: dict = {}
    for student, path in entries:
        groups.setdefault(safe_folder_name(student), []).append((student, path))
    keep, refused = [], []
    for group in groups.values():
        if len(group) == 1:
            keep.extend(group)
            continue
        shown = [path.name + ("/" if path.is_dir() else "") for _, path in group]
        for (student, _path), name in zip(group, shown):
            others = " and ".join(repr(n) for n in shown if n != name)
            refused.append(_error(name, f"the submissions {name!r} and {others} would be graded under one id "
                                        f"({student!r}), so neither was graded: rename one of them and run grade "
                                        "again"))
    return sorted(keep, key=lambda e: e[0]), refused


_CONTROL = dict.fromkeys(c for c in range(32) if chr(c) not in "\n\t")
_CONTROL.update(dict.fromkeys(range(0x7F, 0xA0)))
_SURROGATE = re.compile("[\ud800-\udfff]")


def safe_text(value):
    """``value`` with every string in it safe to write anywhere: a lone surrogate (which no UTF-8 file
    can hold) becomes U+FFFD, and control characters but newline and tab (a terminal escape, a
    carriage return that hides a line) are dropped."""
    if isinstance(value, str):
        if value.isascii() and value.isprintable():
            return value
        return _SURROGATE.sub("\ufffd", value).translate(_CONTROL)
    if isinstance(value, dict):
        return {safe_text(k): safe_text(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [safe_text(v) for v in value]
    return value


ROOT_PREFIX = "crashcourse-"  # a judge's folder: crashcourse-<the batch's pid>-<random>


def sweep_leftovers(cgroup_age: float = 60.0) -> list:
    """Remove what a batch killed outright (SIGKILL, a power cut) left: its judges' folders and its
    boxes' cgroups. A folder is swept only when the batch that made it (the pid in its name) is gone;
    a cgroup only when no process is in it and it is a minute old. Returns what was removed."""
    removed = []
    base = tempfile.gettempdir()
    pattern = re.compile(re.escape(ROOT_PREFIX) + r"(\d+)-[a-z0-9_]{8}$")
    with contextlib.suppress(OSError):
        for name in os.listdir(base):
            match = pattern.match(name)
            if not match or int(match.group(1)) == os.getpid() or _alive(int(match.group(1))):
                continue
            path = os.path.join(base, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed + bubblewrap.sweep_cgroups(cgroup_age)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def unpack(source: Path, target: Path, wanted: tuple = (), level_name: str = "") -> Optional[str]:
    """Copy a folder, or extract a zip safely, into ``target``. Returns a problem, or None.

    ``wanted``: the level's file names. Where they are not at the top but together in one folder
    further down (a whole workspace handed in: ``exercises/level2/agent.py``, at any depth), that
    folder becomes the submission; with several, the one named ``level_name`` wins."""
    if source.is_dir():
        shutil.copytree(source, target, symlinks=True)
    else:
        problem = _extract_zip(source, target)
        if problem:
            return problem
    # Links are dropped: one pointing at an instructor's file would let the grader itself read it
    # (answers.md is shown in the report) from outside the sandbox.
    for dirpath, dirnames, filenames in os.walk(target):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                os.unlink(path)
    # A zip of the folder rather than of its files: look inside the one folder it holds.
    inside = [p for p in target.iterdir() if not p.name.startswith(".")]
    if len(inside) == 1 and inside[0].is_dir() and not list(target.glob("*.py")):
        # Renamed aside first: the folder may hold a file of its own name (x/x).
        aside = inside[0].rename(target / f".crashcourse-unpacking-{uuid.uuid4().hex}")
        for p in list(aside.iterdir()):
            p.rename(target / p.name)
        aside.rmdir()
    if wanted and not all((target / name).is_file() for name in wanted):
        _lift(target, wanted, level_name)
    return None


def _extract_zip(source: Path, target: Path) -> Optional[str]:
    """Extract a zip into ``target``, refusing paths outside it, links, and more than the caps allow."""
    try:
        with zipfile.ZipFile(source) as z:
            members = z.infolist()
            if len(members) > MAX_FILES or sum(m.file_size for m in members) > MAX_UNZIPPED:
                return f"{source.name} unpacks to more than {MAX_UNZIPPED // 2**20} MiB or {MAX_FILES} files"
            target.mkdir(parents=True)
            budget = MAX_UNZIPPED
            for m in members:
                name = m.filename.replace("\\", "/")
                parts = [p for p in name.split("/") if p not in ("", ".")]
                if name.startswith("/") or ".." in parts or (m.external_attr >> 16) & 0o170000 == 0o120000:
                    return f"{source.name} holds a path the grader will not unpack: {m.filename!r}"
                if not parts or parts[0] == "__MACOSX":
                    continue
                dest = target.joinpath(*parts)
                if m.is_dir():
                    dest.mkdir(parents=True, exist_ok=True)
                    continue
                dest.parent.mkdir(parents=True, exist_ok=True)
                with z.open(m) as src, open(dest, "wb") as dst:
                    # The sizes a zip declares can lie (a zip bomb): count what really comes out.
                    while chunk := src.read(1 << 20):
                        budget -= len(chunk)
                        if budget < 0:
                            return f"{source.name} unpacks to more than {MAX_UNZIPPED // 2**20} MiB"
                        dst.write(chunk)
    except (zipfile.BadZipFile, OSError, RuntimeError) as exc:
        return f"{source.name} is not a zip file the grader can read ({exc})"
    return None


def _lift(target: Path, wanted: tuple, level_name: str) -> None:
    """Make the one folder under ``target`` that holds every wanted file the submission itself."""
    found = []
    for dirpath, dirnames, filenames in os.walk(target):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in ("__MACOSX", "__pycache__"))
        if all(name in filenames for name in wanted):
            found.append(Path(dirpath))
    named = [f for f in found if f.name == level_name]
    chosen = named[0] if len(named) == 1 else found[0] if len(found) == 1 else None
    if chosen is None or chosen == target:
        return  # none, or no telling which: the tests then say which file is missing
    aside = target.with_name(target.name + f".crashcourse-whole-{uuid.uuid4().hex}")
    target.rename(aside)
    (aside / chosen.relative_to(target)).rename(target)
    shutil.rmtree(aside, ignore_errors=True)


def preload(level_dir: Path, seed: Optional[int] = None, examples: Optional[int] = None) -> None:
    """Import everything a judge needs once, here, so each forked judge starts warm.

    The generated conversations are drawn here too: drawing is the slow part of a property test,
    and every forked judge inherits the lists instead of drawing them again.
    """
    import hypothesis  # noqa: F401
    import pytest

    from grader.engine import conversations  # noqa: F401
    from grader.engine import explore  # noqa: F401
    from grader.grading import judge  # noqa: F401
    from grader.levels import parallel_calls  # noqa: F401 - registers level 5's conversations for warm()
    from grader.engine import scripted  # noqa: F401
    interrupted = _InterruptSeen()
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull), contextlib.redirect_stderr(devnull):
        cwd = os.getcwd()
        try:
            os.chdir(KIT_ROOT)
            # (pytest-benchmark, where installed, would leave an empty .benchmarks in the kit.)
            pytest.main([str(level_dir), "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark",
                         "--rootdir", str(KIT_ROOT)], plugins=[interrupted])
        finally:
            os.chdir(cwd)
    if interrupted.seen:
        raise KeyboardInterrupt  # pytest keeps a Ctrl-C to itself; the instructor meant the whole batch
    # (The collect-only run above imported the pytest plugin too, through its entry point.)
    seed = scripted.DEFAULT_SEED if seed is None else seed
    # Never read drawn conversations from the disk cache here: a submission runs as the same user
    # and could have written it. The judges fork from this process and inherit the setting.
    os.environ[conversations.CACHE_ENV] = "off"
    conversations.warm(seed, scripted.DEFAULT_EXAMPLES if examples is None else examples,
                       conversations.draws_in(sorted(level_dir.glob("test_*.py"))))
    # What a correct loop saves on each of those conversations: every judge compares with it.
    from grader.engine.checkpoint import reference_saves
    scenarios = [scripted.support_tickets(seed)] + conversations.drawn("conversations")
    for scenario in scenarios:
        reference_saves(scenario.task, scenario.responses, scenario.results)
    _warm_verdicts(level_dir, scenarios)


class _InterruptSeen:
    """A pytest plugin that notes a Ctrl-C, which pytest.main() would otherwise turn into a return code."""

    seen = False

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        self.seen = True


def _warm_verdicts(level_dir: Path, scenarios: list) -> None:
    """Let the level's module do, once and before the judges fork, what every judge would redo
    (for the loop levels: check the kit's own solution, so equal saves are judged by lookup)."""
    from grader.levels import manifest
    try:
        level = next(lv for lv in manifest.load(KIT_ROOT).levels if lv.starter_dir.resolve() == level_dir.resolve())
    except Exception:  # noqa: BLE001 - no manifest (the Gradescope zip carries none): nothing to warm
        return
    level.plugin.warm(level, scenarios)


class Job:
    def __init__(self, student: str, source: Path, root: str):
        self.student, self.source, self.root = student, source, root
        self.token = uuid.uuid4().hex
        self.pid = 0
        self.fd = -1
        self.data = bytearray()
        self.started = 0.0
        self.result: Optional[dict] = None


def grade_batch(submissions: str, level: int, *, jobs: int = 2, timeout: float = 60.0, seed: Optional[int] = None,
                scenarios: Optional[str] = None, examples: Optional[int] = None, progress=None,
                protect: tuple = (), journal=None, boxed: Optional[bool] = None, unboxed: str = "none",
                require_box: bool = True) -> dict:
    """Grade every submission in the folder; returns ``{"level", "isolation", "kernel_trace",
    "submissions", "notes"}`` (``kernel_trace``: None when strace's account was taken, else why not).

    With a :class:`grader.grading.batch_journal.BatchJournal`, submissions it already holds (same
    files) are taken from it, and each one graded here is appended to it the moment it finishes.
    ``progress``: an object told ``start(total, resumed, journal_path)``, ``step(result)`` per
    finished submission, and ``close()`` (the instructor's face draws a bar with it).

    ``boxed``: True runs each submission in a bubblewrap box (:mod:`grader.grading.bubblewrap`); False runs
    it without one (``isolation`` is then ``unboxed``, and the reports say the grades are not
    tamper-proof); None uses a box if one starts here, and otherwise raises :class:`NoBox`, or with
    ``require_box=False`` grades without one.
    """
    level_dir = level_folder(level)
    # Grading writes nothing into the kit's folder (an editable install reads the checkout itself):
    # no compiled file of the level's tests, the solutions it warms up with, or the grader's modules.
    sys.dont_write_bytecode = True
    # Each judge changes folder before it reads the scenarios: a relative path is taken from here.
    scenarios = os.path.abspath(scenarios) if scenarios else None
    boxed = _choose_box(boxed, require_box)
    bubblewrap.not_dumpable()
    sweep_leftovers()
    entries, refused = unique_ids(discover(submissions))
    read_only = False if boxed else sandbox.read_only_view_available()
    traced = kernel_trace.problem()  # checked once here, before the judges fork, so each inherits the answer
    notes = _machine_notes(boxed, read_only, traced)
    queue, done = journal.split(entries) if journal is not None else (list(entries), [])
    done = done + refused
    if progress is not None:
        progress.start(len(entries), done, journal.path if journal is not None else None)
    sandbox.set_subreaper()
    watched = [submissions] + [p for p in protect if p]
    before = sandbox.tree_state(watched)
    if queue:  # a batch wholly in the journal (another report from the same run) needs no warm-up
        config = _warm_up(level_dir, seed, examples)
        # The journal holds other students' results: the code being graded must not read or change it.
        hidden = watched + ([journal.folder] if journal is not None else [])
        runner = _Runner(level_dir, jobs, timeout, dict(seed=seed, scenarios=scenarios, examples=examples,
                                                        read_only=read_only, hide=hidden, config=config,
                                                        boxed=boxed))

        def finished(result: dict) -> None:
            # Text from a box (an exception's message, its output) is made safe before the journal
            # or any report sees it: one odd character must not stop the batch, or its rerun.
            result = safe_text(result)
            done.append(result)
            if journal is not None:
                journal.record(result)
            if progress is not None:
                progress.step(result)
        try:
            runner.run(queue, finished)
        finally:
            if progress is not None:
                progress.close()
    elif progress is not None:
        progress.close()
    changed = sandbox.tree_changes(before, sandbox.tree_state(watched))
    if changed:
        notes.append("these paths changed while grading, which no submission should be able to do: "
                     + ", ".join(changed[:10]))
        for result in done:
            result.setdefault("warnings", []).append("the submissions folder changed while this batch ran")
    done.sort(key=lambda r: r["id"])
    return {"level": level, "isolation": "bubblewrap" if boxed else unboxed, "kernel_trace": traced,
            "submissions": done, "notes": notes}


def _choose_box(boxed: Optional[bool], require_box: bool) -> bool:
    if boxed is not None:
        return boxed
    problem = bubblewrap.check()
    if problem is not None and require_box:
        raise NoBox(problem)
    return problem is None


def _machine_notes(boxed: bool, read_only: bool, traced: Optional[str]) -> list:
    """What this machine could not do for the batch, one sentence each."""
    notes = []
    note = bubblewrap.cap_note() if boxed else None
    if note:
        notes.append(note)
    if not boxed and not read_only:
        notes.append("a read-only view of the file system was not available here (it needs root and mount "
                     "namespaces); the grader checked afterwards that the submissions folder did not change instead")
    if traced:
        notes.append(f"no kernel trace of the submissions' file operations: {traced}. The grades rest on what "
                     "each submission's own process recorded, which its code could have changed")
    return notes


def _warm_up(level_dir: Path, seed, examples):
    """Load once what every forked judge needs; returns the judges' shared pytest configuration."""
    preload(level_dir, seed, examples)
    from grader.grading.judge import prepare_config
    config = prepare_config(str(level_dir), seed, examples)
    import gc
    gc.collect()
    gc.freeze()  # what is loaded now is shared by every forked judge; their collections skip it
    return config


class _Runner:
    """Up to ``jobs`` judges at a time, each read from its pipe until it ends or runs out of time."""

    def __init__(self, level_dir: Path, jobs: int, timeout: float, options: dict):
        self.level_dir, self.jobs, self.timeout, self.options = level_dir, jobs, timeout, options
        self.grace = 2 * timeout + 60.0  # the judge's own work on top of the code's budget
        self.running: dict[int, Job] = {}

    def run(self, queue: list, finished) -> None:
        queue = list(queue)
        try:
            while queue or self.running:
                self._start_more(queue, finished)
                if self.running:
                    self._read(finished)
                    self._stop_late(finished)
        finally:
            for job in self.running.values():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(job.pid, signal.SIGKILL)
                _finish(job)

    def _start_more(self, queue: list, finished) -> None:
        while queue and len(self.running) < self.jobs:
            student, source = queue.pop(0)
            _trace_start(student)
            job = _start(student, source, self.level_dir, self.timeout,
                         other_fds=[j.fd for j in self.running.values()], **self.options)
            if job.result is not None:
                _finish(job)
                finished(job.result)
                continue
            self.running[job.fd] = job

    def _read(self, finished) -> None:
        now = time.monotonic()
        wait = max(0.05, min(j.started + self.timeout + self.grace - now for j in self.running.values()))
        ready, _, _ = select.select(list(self.running), [], [], wait)
        for fd in ready:
            job = self.running[fd]
            chunk = os.read(fd, 1 << 20)
            if chunk:
                job.data += chunk
                continue
            del self.running[fd]
            _collect(job, self.timeout)
            _finish(job)
            finished(job.result)

    def _stop_late(self, finished) -> None:
        now = time.monotonic()
        for fd, job in list(self.running.items()):
            if now > job.started + self.timeout + self.grace:
                del self.running[fd]
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(job.pid, signal.SIGKILL)
                job.result = _error(job.student, f"grading this submission took longer than "
                                                 f"{self.timeout + self.grace:g} s and was stopped")
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(job.pid, 0)
                _finish(job)
                finished(job.result)


def _trace_start(student: str) -> None:
    """For the kit's own tests: with CRASHCOURSE_GRADE_TRACE naming a file, note each submission
    whose grading starts, so a test can count that a resumed batch grades nothing twice."""
    trace = os.environ.get("CRASHCOURSE_GRADE_TRACE")
    if trace:
        with open(trace, "a", encoding="utf-8") as f:
            f.write(student + "\n")


def _error(student: str, reason: str) -> dict:
    return {"id": student, "score": 0.0, "max_score": 0.0, "status": "error", "error": reason, "tests": []}


def _start(student: str, source: Path, level_dir: Path, timeout: float, *, seed, scenarios, examples, read_only,
           other_fds: list, hide: list = (), config=None, boxed: bool = False) -> Job:
    # Named for this batch, so the next one can tell a folder a killed batch left (sweep_leftovers).
    root = tempfile.mkdtemp(prefix=f"{ROOT_PREFIX}{os.getpid()}-")
    job = Job(student, source, root)
    try:
        wanted = tuple(sorted(p.name for p in level_dir.glob("*.py") if not p.name.startswith("test_")))
        problem = unpack(source, Path(root) / "submission", wanted, level_dir.name)
    except Exception as exc:  # noqa: BLE001 - one odd folder must not stop the batch
        problem = f"the grader could not copy this submission ({type(exc).__name__}: {exc})"
    if problem:
        job.result = _error(student, problem)
        return job
    r, w = os.pipe()
    job.started = time.monotonic()
    # Ctrl-C waits until fork is over: one that lands in fork's own Python hooks (logging's lock) is
    # printed and dropped there, and the batch would run on to the end.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    pid = -1
    try:
        pid = os.fork()
    finally:
        if pid != 0:  # the judge lets it through below, once it has its own handler
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if pid == 0:  # the judge
        try:
            os.close(r)
            for fd in other_fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            os.setpgid(0, 0)
            sandbox.die_with_parent()
            sandbox.set_subreaper()
            null = os.open(os.devnull, os.O_RDWR)
            for std in (0, 1, 2):
                os.dup2(null, std)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
            bubblewrap.not_dumpable()
            cap_judge_memory()
            if boxed:
                # Its own mount namespace, with a size-capped tmpfs as the box's only writable folder.
                bubblewrap.private_disk(root, bubblewrap.Limits().disk)
            from grader.grading.judge import run_judge
            started = time.monotonic()
            result = run_judge(str(level_dir), os.path.join(root, "submission"), root, job.token, seed=seed,
                               timeout=timeout, scenarios=scenarios, examples=examples, student=student,
                               read_only=read_only, hide=tuple(hide), config=config, boxed=boxed)
            result["seconds"] = time.monotonic() - started
            data = json.dumps(result).encode()
        except BaseException as exc:  # noqa: BLE001 - whatever happens, the batch hears about it
            data = json.dumps(_error(student, f"the grader failed on this submission: {type(exc).__name__}: {exc}"))\
                .encode()
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(w, view):]
        finally:
            os._exit(0)
    os.close(w)
    job.pid, job.fd = pid, r
    return job


def default_jobs() -> int:
    """How many submissions ``grade`` runs at once by default: two per core this process may use, at
    most eight, and at most one per GiB of memory.

    A submission does not keep a core busy on its own: its judge and its worker take turns (the
    judge waits while the code runs, the code waits while the judge reads the kernel's trace), and
    each start of a box waits on the kernel. On the 2-core development machine two at a time kept
    the cores busy about half the time; four at a time grade a class a few percent sooner
    (benchmarks/README.md). More than eight would let a class of memory-hungry submissions (a judge
    may map up to 2 GiB, most need 150 to 350 MiB) crowd the machine.
    """
    jobs = min(8, 2 * usable_cores())
    try:
        gib = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 1024 ** 3
    except (AttributeError, ValueError, OSError):
        gib = 0
    return max(1, min(jobs, gib)) if gib else jobs


# What one judge may map: a judge needs 150 to 350 MiB (level 6's long run is the largest), so this
# only ever stops one that something from a box made grow without bound; it then fails that one
# submission with a MemoryError, and its neighbours and the machine go on. Its boxes set their own cap.
JUDGE_MEMORY = 2 * 1024 ** 3


def cap_judge_memory(limit: int = JUDGE_MEMORY) -> None:
    """Cap this process's address space (the soft limit: the boxes it starts set their own, lower or not)."""
    import resource
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (min(limit, hard) if hard != resource.RLIM_INFINITY else limit,
                                                hard))


def _collect(job: Job, timeout: float) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(job.pid, 0)
    try:
        job.result = json.loads(bytes(job.data))
    except ValueError:
        job.result = _error(job.student, "the grading process for this submission ended without a result")
    job.result["id"] = job.student


def _finish(job: Job) -> None:
    if job.fd >= 0:
        with contextlib.suppress(OSError):
            os.close(job.fd)
        job.fd = -1
    strays = sandbox.kill_tree(job.token, home=os.path.join(job.root, "home"))
    if strays and job.result is not None:
        job.result["stray_processes"] = job.result.get("stray_processes", 0) + strays
    sandbox.reap()
    shutil.rmtree(job.root, ignore_errors=True)
