"""Instructor commands: ``crashcourse grade`` and ``crashcourse gradescope-package``.

``crashcourse grade SUBMISSIONS --level N`` grades every folder (or ``.zip``) in SUBMISSIONS with
the level's own tests, ``exercises/levelN/test_*.py``, exactly as a student's ``pytest
exercises/levelN`` would, but each submission in its own bubblewrap box (see
:mod:`grader.grading.bubblewrap`) and with the verdict computed outside it (see
:mod:`grader.grading.judge`). :func:`box_or_refusal` checks at start-up that a box starts here.

How a batch runs: this process imports pytest, Hypothesis, the crash engine and the level's
tests once, then forks one judge per submission (up to ``--jobs`` at a time), so no judge pays
for Python's start-up again. Each judge starts one sandboxed worker for the student's code and
sends back its results as JSON on a pipe; this process writes the report.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
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

from grader.grading import bubblewrap
from grader.grading import reports
from grader.grading import sandbox
from grader.grading import kernel_trace
from grader.levels.manifest import package_root

# The instructor's kit: a checkout, or the copy a wheel carries (never a student's workspace).
KIT_ROOT = package_root()
MAX_UNZIPPED = 100 * 1024 ** 2
MAX_FILES = 2000

GRADE_HELP = """\
Grade a folder of submissions with a level's tests, each one isolated and time-boxed.

SUBMISSIONS holds one folder or .zip per student; its name (without .zip) is the student id.
Each submission is copied into a fresh temporary folder, and its code runs in a bubblewrap box
(install the `bubblewrap` package): no network, no other student's files, none of the kit but the
grader itself, a small disk of its own, caps on time, memory and processes. The tests run in
another process, which the student's code cannot reach: printing fake results, exiting early or
patching pytest earns what the code really earned. Where no box can start, grade says what to
install or enable and stops; --no-box grades anyway, and every report then says the grades are
not tamper-proof.

examples:
  crashcourse grade submissions/ --level 2                     JSON on stdout
  crashcourse grade submissions/ --level 2 --format md --output class.md
  crashcourse grade submissions/ --level 2 --format gradescope --output results/
  crashcourse grade submissions/ --level 2 --seed 7 --scenarios private/extra.json

A journal of finished submissions is kept in .crashcourse-grade/ beside the report (beside
SUBMISSIONS when the report goes to stdout). Run the same command again after a stop and only the
submissions not in it, or whose files changed, are graded; --fresh grades everything again.
"""

PACKAGE_HELP = """\
Build the autograder zip for Gradescope (setup.sh, run_autograder, the kit and the level's tests).
Upload it as a "Zip file upload" autograder; students then submit the level's file(s).
Seeds and scenarios you pass here go into the zip, which students never see.
"""


def register(sub) -> None:
    grade = sub.add_parser("grade", help="(instructors) grade a folder of submissions, isolated, with reports",
                           description=GRADE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    grade.add_argument("submissions", metavar="SUBMISSIONS", help="folder with one folder or .zip per student")
    grade.add_argument("--level", type=int, required=True, help="the level to grade (its tests in exercises/levelN)")
    grade.add_argument("--format", choices=reports.FORMATS, default="json", help="report format (default json)")
    grade.add_argument("--output", metavar="PATH", help="write the report here (for gradescope: a folder); "
                       "default stdout (gradescope: ./gradescope-results)")
    # Each submission keeps about one core busy (its judge and its worker take turns); more than 8
    # at once would let a class of memory-hungry submissions (up to 2 GiB each) crowd the machine.
    grade.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1), metavar="K",
                       help="submissions graded at once (default: the number of cores, at most 8)")
    grade.add_argument("--timeout", type=float, default=60.0, metavar="S",
                       help="wall-clock seconds one submission's code may run in total (default 60)")
    grade.add_argument("--seed", type=int, default=None, metavar="N",
                       help="seed for the scripted model and generated conversations (instructor-only)")
    grade.add_argument("--scenarios", metavar="PATH", default=None,
                       help="extra instructor-only scenarios, a JSON or Python file (see grader.grading.scenarios.load_scenarios)")
    grade.add_argument("--examples", type=int, default=None, metavar="N",
                       help="generated conversations per property test (default: the level's own)")
    grade.add_argument("--no-progress", action="store_true", help="no progress bar, even on a terminal")
    grade.add_argument("--fresh", action="store_true",
                       help="grade every submission again, ignoring (and replacing) the journal of an earlier run")
    grade.add_argument("--no-box", action="store_true",
                       help="grade even where no bubblewrap box can start: the code then runs without one, "
                            "and every report says the grades are not tamper-proof")
    grade.set_defaults(handler=_grade)

    package = sub.add_parser("gradescope-package", help="(instructors) build the Gradescope autograder zip",
                             description=PACKAGE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    package.add_argument("--level", type=int, required=True)
    package.add_argument("--output", metavar="PATH", default=None, help="zip to write (default "
                         "crashcourse-levelN-autograder.zip)")
    package.add_argument("--seed", type=int, default=None)
    package.add_argument("--scenarios", default=None, metavar="PATH")
    package.add_argument("--timeout", type=float, default=120.0)
    package.set_defaults(handler=_package)

    run = sub.add_parser("gradescope-run")  # no help: hidden from `crashcourse --help`
    run.add_argument("--level", type=int, required=True)
    run.add_argument("--submission", default="/autograder/submission")
    run.add_argument("--results", default="/autograder/results/results.json")
    run.add_argument("--seed", type=int, default=None)
    run.add_argument("--scenarios", default=None)
    run.add_argument("--timeout", type=float, default=120.0)
    run.set_defaults(handler=_gradescope_run)


# -- the command -------------------------------------------------------------------------------------

def level_folder(level: int) -> Path:
    folder = KIT_ROOT / "exercises" / f"level{level}"
    if not folder.is_dir() or not list(folder.glob("test_*.py")):
        have = sorted(p.name for p in (KIT_ROOT / "exercises").glob("level*") if list(p.glob("test_*.py")))
        raise SystemExit(f"crashcourse grade: level {level} has no tests in {folder}. Levels with tests: "
                         f"{', '.join(have) or 'none'}.")
    return folder


def _grade(args) -> int:
    if not os.path.isdir(args.submissions):
        print(f"crashcourse grade: {args.submissions} is not a folder. Point it at a folder that holds one folder "
              "or .zip per student.", file=sys.stderr)
        return 2
    if args.scenarios and not os.path.isfile(args.scenarios):
        print(f"crashcourse grade: --scenarios {args.scenarios}: no such file", file=sys.stderr)
        return 2
    if args.jobs < 1 or args.timeout <= 0:
        print("crashcourse grade: --jobs must be at least 1 and --timeout above 0", file=sys.stderr)
        return 2
    output = args.output or ("gradescope-results" if args.format == "gradescope" else None)
    progress = sys.stderr.isatty() and not args.no_progress
    boxed = box_or_refusal(args.no_box)
    if boxed is None:
        return 2
    journal, refused = _open_journal(args, output, "bubblewrap" if boxed else "none")
    if refused:
        return 2
    try:
        batch = grade_batch(args.submissions, args.level, jobs=args.jobs, timeout=args.timeout, seed=args.seed,
                            scenarios=args.scenarios, examples=args.examples, progress=progress,
                            protect=[output] if output else [], journal=journal, boxed=boxed)
    except KeyboardInterrupt:
        if journal is not None:
            print(f"\ncrashcourse grade: stopped. The submissions that finished are in {journal.path}; run the same "
                  "command again to grade only the rest.", file=sys.stderr)
        return 130
    if args.format == "gradescope":
        written = reports.write_gradescope(batch, output)
        print(f"wrote {len(written)} results.json file(s) under {output.rstrip(os.sep)}/", file=sys.stderr)
    elif output:
        reports.write_report(batch, args.format, output)
        print(f"wrote {output}", file=sys.stderr)
    else:
        sys.stdout.write(reports.render(batch, args.format))
    for note in batch.get("notes", []):
        print(f"note: {note}", file=sys.stderr)
    if journal is not None:
        _close_journal(journal, batch)
    return 0


def _open_journal(args, output: Optional[str], isolation: str = "none") -> tuple:
    """``(journal, refused)``: the batch's journal (None if none can be kept here), and whether an
    untrusted one is in the way (then the batch must not start)."""
    from grader.grading import batch_journal

    path = batch_journal.journal_path(args.submissions, output, args.level)
    wanted = batch_journal.settings(args.level, level_folder(args.level), seed=args.seed, timeout=args.timeout,
                                    examples=args.examples, scenarios=args.scenarios)
    wanted["isolation"] = isolation  # a grade from an unboxed run is not one a boxed run may take over
    try:
        journal = batch_journal.BatchJournal.open(path, wanted, fresh=args.fresh, submissions=args.submissions)
    except batch_journal.JournalRefused as exc:
        print(f"crashcourse grade: {exc}", file=sys.stderr)
        return None, True
    except OSError as exc:
        print(f"note: no journal can be kept at {path} ({exc.strerror}), so if this batch is stopped, a rerun "
              "grades everything again.", file=sys.stderr)
        return None, False
    for note in journal.notes:
        print(f"note: {note}", file=sys.stderr)
    return journal, False


def _close_journal(journal, batch: dict) -> None:
    total = len(batch["submissions"])
    if journal.changed_by_others():
        # Only this process writes the journal; anything else in it could be planted results.
        journal.discard()
        print(f"note: the journal {journal.path} changed while this batch ran, by something other than the grader. "
              "It has been deleted, so the next run grades everything again.", file=sys.stderr)
    elif journal.resumed:
        print(f"resumed {journal.resumed} of {total} submission(s) from the journal {journal.path}; graded "
              f"{total - journal.resumed}. Add --fresh to grade all of them again.", file=sys.stderr)
    else:
        print(f"graded {total} submission(s); the journal {journal.path} keeps their results, so a stopped "
              "or repeated run grades only what changed.", file=sys.stderr)
    journal.close()


def box_or_refusal(no_box: bool) -> Optional[bool]:
    """True if a bubblewrap box works here; False if not but the instructor passed ``--no-box``;
    None (after saying why, and what to do) if grading must not start."""
    bubblewrap.not_dumpable()  # nothing on this machine may read grade's memory or environment
    problem = bubblewrap.check()
    if problem is None:
        if no_box:
            print("crashcourse grade: note: a bubblewrap box works here, so every submission runs in one; "
                  "--no-box only matters where none can start.", file=sys.stderr)
        return True
    if no_box:
        print(f"crashcourse grade: warning: grading without a box, as --no-box asks. {problem}\n"
              "Every report will say these grades are not tamper-proof.", file=sys.stderr)
        return False
    print(f"crashcourse grade: no box for the submissions' code. {problem}\n"
          "Without a box, a submission could change its own grade or another student's. Fix the above, "
          "or grade anyway with --no-box (every report then says the grades are not tamper-proof).",
          file=sys.stderr)
    return None


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


def unpack(source: Path, target: Path) -> Optional[str]:
    """Copy a folder, or extract a zip safely, into ``target``. Returns a problem, or None."""
    if source.is_dir():
        shutil.copytree(source, target, symlinks=True)
    else:
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
    return None


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
            pytest.main([str(level_dir), "--collect-only", "-q", "-p", "no:cacheprovider", "--rootdir", str(KIT_ROOT)],
                        plugins=[interrupted])
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
                scenarios: Optional[str] = None, examples: Optional[int] = None, progress: bool = False,
                protect: tuple = (), journal=None, boxed: Optional[bool] = None, unboxed: str = "none",
                require_box: bool = True) -> dict:
    """Grade every submission in the folder; returns ``{"level", "isolation", "submissions", "notes"}``.

    With a :class:`grader.grading.batch_journal.BatchJournal`, submissions it already holds (same
    files) are taken from it, and each one graded here is appended to it the moment it finishes.

    ``boxed``: True runs each submission in a bubblewrap box (:mod:`grader.grading.bubblewrap`); False runs
    it without one (``isolation`` is then ``unboxed``, and the reports say the grades are not
    tamper-proof); None uses a box if one starts here, and otherwise raises :class:`NoBox`, or with
    ``require_box=False`` grades without one.
    """
    level_dir = level_folder(level)
    if boxed is None:
        problem = bubblewrap.check()
        if problem is not None and require_box:
            raise NoBox(problem)
        boxed = problem is None
    bubblewrap.not_dumpable()
    entries = discover(submissions)
    notes = []
    if boxed:
        note = bubblewrap.cap_note()
        if note:
            notes.append(note)
    read_only = False if boxed else sandbox.read_only_view_available()
    if not boxed and not read_only:
        notes.append("a read-only view of the file system was not available here (it needs root and mount "
                     "namespaces); the grader checked afterwards that the submissions folder did not change instead")
    traced = kernel_trace.problem()  # checked once here, before the judges fork, so each inherits the answer
    if traced:
        notes.append(f"no kernel trace of the submissions' file operations: {traced}. The grades rest on what "
                     "each submission's own process recorded, which its code could have changed")
    preload(level_dir, seed, examples)
    from grader.grading.judge import prepare_config
    config = prepare_config(str(level_dir), seed, examples)
    import gc
    gc.collect()
    gc.freeze()  # what is loaded now is shared by every forked judge; their collections skip it
    sandbox.set_subreaper()
    watched = [submissions] + [p for p in protect if p]
    before = sandbox.tree_state(watched)
    queue = list(entries)
    running: dict[int, Job] = {}
    done: list[dict] = []
    if journal is not None:
        queue, resumed = journal.split(entries)
        done.extend(resumed)
        if resumed and not progress:  # a CI log says it up front; a terminal has the bar
            print(f"resuming: {len(resumed)} of {len(entries)} submission(s) are in the journal {journal.path}; "
                  f"grading the other {len(queue)}", file=sys.stderr)
    bar = Progress(len(entries), done) if progress else None
    # The journal holds other students' results: the code being graded must not read or change it.
    hidden = [submissions] + [p for p in protect if p] + ([journal.folder] if journal is not None else [])

    def finished(result: dict) -> None:
        done.append(result)
        if journal is not None:
            journal.record(result)
        if bar:
            bar.step(result)
    grace = 2 * timeout + 60.0  # the judge's own work on top of the code's budget
    try:
        while queue or running:
            while queue and len(running) < jobs:
                student, source = queue.pop(0)
                _trace_start(student)
                job = _start(student, source, level_dir, timeout, seed, scenarios, examples, read_only,
                             [j.fd for j in running.values()], hide=hidden, config=config, boxed=boxed)
                if job.result is not None:
                    _finish(job)
                    finished(job.result)
                    continue
                running[job.fd] = job
            if not running:
                continue
            now = time.monotonic()
            wait = max(0.05, min(j.started + timeout + grace - now for j in running.values()))
            ready, _, _ = select.select(list(running), [], [], wait)
            for fd in ready:
                job = running[fd]
                chunk = os.read(fd, 1 << 20)
                if chunk:
                    job.data += chunk
                    continue
                del running[fd]
                _collect(job, timeout)
                _finish(job)
                finished(job.result)
            now = time.monotonic()
            for fd, job in list(running.items()):
                if now > job.started + timeout + grace:
                    del running[fd]
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(job.pid, signal.SIGKILL)
                    job.result = _error(job.student, f"grading this submission took longer than {timeout + grace:g} s "
                                                     "and was stopped")
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(job.pid, 0)
                    _finish(job)
                    finished(job.result)
    finally:
        for job in running.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(job.pid, signal.SIGKILL)
            _finish(job)
        if bar:
            bar.close()
    changed = sandbox.tree_changes(before, sandbox.tree_state(watched))
    if changed:
        notes.append("these paths changed while grading, which no submission should be able to do: "
                     + ", ".join(changed[:10]))
        for result in done:
            result.setdefault("warnings", []).append("the submissions folder changed while this batch ran")
    done.sort(key=lambda r: r["id"])
    return {"level": level, "isolation": "bubblewrap" if boxed else unboxed, "submissions": done, "notes": notes}


def _trace_start(student: str) -> None:
    """For the kit's own tests: with CRASHCOURSE_GRADE_TRACE naming a file, note each submission
    whose grading starts, so a test can count that a resumed batch grades nothing twice."""
    trace = os.environ.get("CRASHCOURSE_GRADE_TRACE")
    if trace:
        with open(trace, "a", encoding="utf-8") as f:
            f.write(student + "\n")


def _error(student: str, reason: str) -> dict:
    return {"id": student, "score": 0.0, "max_score": 0.0, "status": "error", "error": reason, "tests": []}


def _start(student: str, source: Path, level_dir: Path, timeout: float, seed, scenarios, examples, read_only,
           other_fds: list, hide: list = (), config=None, boxed: bool = False) -> Job:
    root = tempfile.mkdtemp(prefix="crashcourse-grade-")
    job = Job(student, source, root)
    try:
        problem = unpack(source, Path(root) / "submission")
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
    strays = sandbox.kill_tree(job.token)
    if strays and job.result is not None:
        job.result["stray_processes"] = job.result.get("stray_processes", 0) + strays
    sandbox.reap()
    shutil.rmtree(job.root, ignore_errors=True)


class Progress:
    """A one-line progress bar on stderr (only used when stderr is a terminal)."""

    def __init__(self, total: int, resumed: list = ()):
        self.total, self.resumed = total, len(resumed)
        self.count = self.resumed
        self.failed = sum(r["status"] == "failed" for r in resumed)
        self.errors = sum(r["status"] == "error" for r in resumed)
        self.started = time.monotonic()
        self.draw()

    def step(self, result: dict) -> None:
        self.count += 1
        self.failed += result["status"] == "failed"
        self.errors += result["status"] == "error"
        self.draw()

    def draw(self) -> None:
        width = 30
        filled = int(width * self.count / self.total) if self.total else width
        elapsed = time.monotonic() - self.started
        resumed = f" ({self.resumed} from the journal)" if self.resumed else ""
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.count}/{self.total} done{resumed}, "
                         f"{self.failed} failed, {self.errors} could not be graded, {elapsed:.0f} s")
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\n")
        sys.stderr.flush()


# -- Gradescope --------------------------------------------------------------------------------------

def _package(args) -> int:
    from grader.grading.gradescope import build_package
    level_folder(args.level)
    output = args.output or f"crashcourse-level{args.level}-autograder.zip"
    build_package(args.level, output, seed=args.seed, scenarios=args.scenarios, timeout=args.timeout)
    print(f"wrote {output}: upload it as the assignment's autograder (setup.sh and run_autograder at its root)")
    return 0


def _gradescope_run(args) -> int:
    from grader.grading.gradescope import run_on_gradescope
    return run_on_gradescope(args.level, args.submission, args.results, grade_batch=grade_batch, seed=args.seed,
                             scenarios=args.scenarios,
                             timeout=args.timeout)
