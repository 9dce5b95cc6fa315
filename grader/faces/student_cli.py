"""Student commands: demo, check, hint, watch, selfcheck and run.

Every command reads the level list from ``exercises/manifest.json`` (:mod:`grader.levels.manifest`).

``crashcourse demo``
    For each level, the crash matrix of the broken starter beside the solution, on the scripted model.
``crashcourse check N [--path DIR]``
    The level's tests on your files (the same tests as ``pytest exercises/levelN``) and the crash
    matrix of your loop; the first failure explained in full. Exit status 0 only when all pass.
``crashcourse hint N [--reset] [--task K]``
    The next hint for the first task that still fails: a question, then where to look, then the API.
``crashcourse watch [N]``
    Runs check again every time you save one of the level's files. Ctrl-C stops it.
``crashcourse selfcheck``
    (For the kit's maintainers.) Every starter breaks what it is planted to break, every solution
    passes, every README task has its three hints, and the manifest is in order.
``crashcourse run N [--live]``
    Runs your loop once and shows the conversation and what it left on disk, however it ended;
    ``run 4`` resumes what a run left. ``--live`` uses the real Messages API (needs the SDK and
    ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN; see :mod:`grader.faces.live`).

This module is also a tiny pytest plugin (``-p grader.faces.student_cli``): when CRASHCOURSE_REPORT names
a file, each test's outcome, task, points and failure text are appended to it as JSON lines. That
is how ``check`` reads the very same test run that ``pytest`` shows.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from grader.atomicfile import write_atomic
from grader.levels import manifest as manifest_mod
from grader.levels import registry
from grader.faces import matrix
from grader.engine import hangs, loader, recorder
from grader.engine.invariants import CAUSES
from grader.engine.scripted import DEFAULT_SEED
from grader.grading.outcomes import Outcome, Outcomes

STATE_DIR = ".crashcourse"
STEP_NAMES = ("A question", "Where to look", "What to reach for")
TEST_TIMEOUT = 300
DEFAULT_RUN_DIR = os.path.join(STATE_DIR, "run", "checkpoints")


# --- the pytest half: report each test to check ---------------------------------------------------


class ReportFile(Outcomes):
    """Appends each test's final outcome to the file CRASHCOURSE_REPORT names, one JSON line each."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def finished(self, entry: Outcome) -> None:
        record = {"nodeid": entry.nodeid, "outcome": entry.status, "task": entry.task, "points": entry.points,
                  "message": entry.output if entry.status in ("failed", "error") else "",
                  "checks": entry.checks, "causes": entry.causes}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def pytest_configure(config: Any) -> None:
    path = os.environ.get("CRASHCOURSE_REPORT")
    if path:
        config.pluginmanager.register(ReportFile(path), "crashcourse-report-file")


# --- running a level's tests ----------------------------------------------------------------------


@dataclass
class TestResult:
    nodeid: str
    outcome: str
    task: Optional[int]
    points: Optional[float]
    message: str
    checks: list = field(default_factory=list)   # check ids it tripped (grader.levels.registry), as data
    causes: list = field(default_factory=list)   # why, most telling first (grader.engine.invariants.CAUSES)

    @property
    def name(self) -> str:
        return self.nodeid.split("::")[-1]

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"


@dataclass
class TestRun:
    returncode: int
    results: list = field(default_factory=list)
    output: str = ""
    problem: str = ""   # the run itself went wrong (timeout, collection error)

    @property
    def passed(self) -> bool:
        return self.returncode == 0 and not self.problem

    def failing_tasks(self) -> list[int]:
        return sorted({r.task or 0 for r in self.results if not r.passed})

    def first_failure(self) -> Optional[TestResult]:
        return next((r for r in self.results if not r.passed), None)

    def first_causes(self) -> list:
        """Why the first failing test failed (the causes it recorded), or []."""
        first = self.first_failure()
        return list(first.causes) if first is not None else []

    def points(self) -> tuple[float, float]:
        scored = [r for r in self.results if r.points is not None and r.outcome != "skipped"]
        return sum(r.points for r in scored if r.passed), sum(r.points for r in scored)


def run_tests(level: manifest_mod.Level, folder: Path, *, examples: Optional[int] = None,
              seed: Optional[int] = None, timeout: float = TEST_TIMEOUT) -> TestRun:
    """The level's tests on ``folder``, in a fresh pytest process (as ``pytest exercises/levelN`` runs them)."""
    tests = level.test_paths()
    if not tests:
        return TestRun(2, problem=f"{level.folder}/ has no test files yet, so there is nothing to check against.")
    # This often runs in a thread while the crash matrix records the learner's loop in the main
    # thread; the pytest it starts is the grader's, not the loop's.
    with recorder.grader_work(), tempfile.TemporaryDirectory(prefix="crashcourse-check-") as tmp:
        report = Path(tmp) / "report.jsonl"
        cmd = [sys.executable, "-m", "pytest", *[str(t) for t in tests], "--submission", str(folder), "-q",
               "-p", "no:cacheprovider", "-p", "grader.faces.student_cli", "--color=no"]
        if examples is not None:
            cmd += ["--crashcourse-examples", str(examples)]
        if seed is not None:
            cmd += ["--crashcourse-seed", str(seed)]
        env = dict(os.environ, CRASHCOURSE_REPORT=str(report), PYTHONDONTWRITEBYTECODE="1")
        try:
            # Same process group on purpose: Ctrl-C in `watch` stops this pytest too, at once.
            proc = subprocess.run(cmd, cwd=str(level.root), env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return TestRun(124, problem=f"the tests were still running after {timeout:g} s; does the loop wait "
                                        "forever somewhere?")
        results = []
        if report.exists():
            for line in report.read_text(encoding="utf-8").splitlines():
                r = json.loads(line)
                results.append(TestResult(r["nodeid"], r["outcome"], r["task"], r["points"], r["message"],
                                          r.get("checks") or [], r.get("causes") or []))
        run = TestRun(proc.returncode, results, proc.stdout + proc.stderr)
        if proc.returncode not in (0, 1) or (proc.returncode == 1 and not any(not r.passed for r in results)):
            tail = "\n".join(run.output.strip().splitlines()[-15:])
            run.problem = f"pytest could not run the tests (exit status {proc.returncode}):\n{tail}"
        return run


# --- shared helpers -------------------------------------------------------------------------------


def _manifest() -> manifest_mod.Manifest:
    return manifest_mod.load()


def _say(text: str = "", stream: Any = None) -> None:
    print(text, file=stream or sys.stdout)


def _rel(path: Path) -> str:
    """``path`` relative to the current folder when it lies inside it, else absolute."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if rel.startswith("..") else rel


def _state_path(name: str) -> Path:
    return Path.cwd() / STATE_DIR / name


def _read_state(name: str) -> dict:
    try:
        return json.loads(_state_path(name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _write_state(name: str, data: dict) -> None:
    path = _state_path(name)
    try:
        path.parent.mkdir(exist_ok=True)
        # Whole or not at all, as the lesson teaches; no folder fsync, since a power cut that
        # brings back the previous state only means a hint is shown again.
        write_atomic(path, json.dumps(data, indent=1, sort_keys=True), durable=False)
    except OSError:
        pass  # a read-only folder only costs the memory of which hints were shown


def files_signature(paths: list[Path]) -> list:
    out = []
    for path in paths:
        try:
            st = os.stat(path)
            out.append([str(path), st.st_mtime_ns, st.st_size])
        except OSError:
            out.append([str(path), None, None])
    return out


def level_column(title: str, folder: Path, level: manifest_mod.Level, seed: int = 0) -> Optional[matrix.Column]:
    """The level's matrix column for the files in ``folder``, or None if its level module draws none."""
    return matrix.level_column(title, folder, level, seed)


def _render(columns: list, level: manifest_mod.Level, paint: matrix.Painter, legend: bool = True,
            told_below: bool = False) -> str:
    return matrix.render(columns, width=matrix.terminal_width(), paint=paint, legend=legend, told_below=told_below,
                         **level.plugin.render_options(level))


def _level_heading(level: manifest_mod.Level, paint: matrix.Painter) -> str:
    return paint.bold(level.label)


def _engine_words(level: manifest_mod.Level) -> str:
    return level.plugin.engine_words(level)


# --- demo -----------------------------------------------------------------------------------------

DEMO_INTRO = """\
crashcourse demo: where a crash lands in an agent loop, and what a resume would find there.

Each level's loop runs once on a scripted model (no network, no key) while every file operation is
recorded; the grader then rebuilds checkpoint.json as a crash at each point would leave it. Rows are
crash points in the loop's words; cells say what a resume would find. Left: the broken starter you
get. Right: the solution.
"""


SOLUTION_IS_THE_INSTRUCTORS = """\
This is a learner's workspace: the solution column is your instructor's and is not shown here.
The starter column is each file as the kit hands it out, whatever you have changed since; for your
own file's column, run crashcourse check N.
"""


def _shipped_starter(kit: manifest_mod.Manifest, level: manifest_mod.Level) -> tuple[str, Path, manifest_mod.Level]:
    """The column to draw as the starter: the title, the folder and the level it belongs to.

    In a workspace the level's folder holds the learner's edits, so the starter is read from the
    kit the package came with; when that copy is not at hand (or is this workspace), the column is
    the learner's file and says so."""
    if not kit.workspace:
        return "starter", level.starter_dir, level
    try:
        source = manifest_mod.load(manifest_mod.package_root())
        shipped = source.level(level.number)
    except manifest_mod.ManifestError:
        source = shipped = None
    if (source is not None and not source.workspace and source.root.resolve() != kit.root.resolve()
            and shipped.name == level.name and shipped.exists()):
        return "starter", shipped.starter_dir, shipped
    return "your file", level.starter_dir, level


def cmd_demo(args: argparse.Namespace) -> int:
    paint = matrix.Painter()
    try:
        kit = _manifest()
    except manifest_mod.ManifestError as exc:
        _say(str(exc))
        return 1
    _say(DEMO_INTRO)
    if kit.workspace or not any(level.solution_dir.is_dir() for level in kit.existing()):
        _say(SOLUTION_IS_THE_INSTRUCTORS)
    shown = 0
    for level in kit.levels:
        if args.level is not None and level.number != args.level:
            continue
        _say(_level_heading(level, paint))
        if not level.exists():
            _say(f"  not in this copy of the kit yet ({level.folder}/ is not there); skipped.\n")
            continue
        columns = []
        sources = [_shipped_starter(kit, level)]
        if not kit.workspace and level.solution_dir.is_dir():
            sources.append(("solution", level.solution_dir, level))
        for title, folder, drawn in sources:
            try:
                # The plugin's seed, as `check` and `pytest` use: the same code gets the same counts.
                col = level_column(title, folder, drawn, DEFAULT_SEED)
            except Exception as exc:  # noqa: BLE001 - one broken level must not hide the others
                col = matrix.failed_column(title, f"the matrix could not be drawn ({type(exc).__name__}: {exc})")
            if col is None:
                break
            columns.append(col)
        if not columns:
            first = level.test_paths()
            where = f"pytest {level.folder}" if first else f"the tests in {level.folder}/ (not written yet)"
            _say(f"  no crash matrix for this kind of level ({level.module}) in the demo yet; {where} shows its "
                 "verdicts.\n")
            continue
        words = _engine_words(level)
        if words:
            _say(textwrap.fill(words, matrix.terminal_width(), initial_indent="  ", subsequent_indent="  "))
        _say(_render(columns, level, paint))
        _say()
        shown += 1
    first = next(iter(kit.existing()), None)
    if first is not None:
        n = first.number
        _say(f"Your turn: read {first.folder}/{first.readme}, open {first.folder}/{first.files[0]}, then run\n"
             f"  pytest {first.folder}      the grader (red until your code survives every crash)\n"
             f"  crashcourse check {n}          the same tests plus your crash matrix, first failure in full\n"
             f"  crashcourse hint {n}           a nudge: a question first, then where to look, then the API\n"
             f"  crashcourse watch {n}          check again every time you save")
    return 0


# --- check ----------------------------------------------------------------------------------------


@dataclass
class CheckOutcome:
    level: manifest_mod.Level
    folder: Path
    column: Optional[matrix.Column]
    tests: TestRun

    @property
    def ok(self) -> bool:
        return self.tests.passed and not (self.column is not None and self.column.failed)


def check_level(level: manifest_mod.Level, folder: Path, *, examples: Optional[int] = None,
                seed: Optional[int] = None, out: Callable[[str], None] = print,
                paint: Optional[matrix.Painter] = None) -> CheckOutcome:
    """Run the level's tests and draw the crash matrix for ``folder``; print the lot through ``out``."""
    paint = paint or matrix.Painter(enabled=False)
    out(_level_heading(level, paint))
    files = ", ".join(_rel(folder / name) for name in level.files)
    out(f"  checking {files}")
    missing = [name for name in level.files if not (folder / name).is_file()]
    if missing:
        out(f"\n  There is no {', '.join(missing)} in {_rel(folder)}. The level grades a file with exactly that name.")
        return CheckOutcome(level, folder, None, TestRun(2, problem="missing file"))
    # The tests run in their own process while the matrix is drawn here (it needs the main thread
    # for its time limit), so a check takes as long as the slower of the two.
    hangs.forget_hangs()  # a fresh verdict: code that got stuck in an earlier check (in `watch`) runs again
    # While the learner's code runs long, say so at once (the tests' own process is captured).
    quiet = hangs.on_slow_loop(lambda line: out(f"  ... {line}"))
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(run_tests, level, folder, examples=examples, seed=seed)
        try:
            # The plugin's seed, so the matrix shows the very run the tests judged.
            col = level_column("your code", folder, level, DEFAULT_SEED if seed is None else seed)
        except Exception as exc:  # noqa: BLE001 - the tests still give the verdict
            col = matrix.failed_column("your code", f"the matrix could not be drawn ({type(exc).__name__}: {exc})")
        finally:
            quiet()
        tests = pending.result()
    outcome = CheckOutcome(level, folder, col, tests)
    first = _first_failure_text(outcome, tests)
    if col is not None and col.exploration is None and "\n" in col.note and first \
            and first.splitlines()[0].strip() == col.note.splitlines()[0].strip():
        # A file that will not import: its error is shown once, in full, as the first failure below.
        col.note = col.note.splitlines()[0].rstrip(":") + " (shown in full below)"
    out("")
    if col is not None:
        words = _engine_words(level)
        if words:
            out(textwrap.fill(words, matrix.terminal_width(), initial_indent="  ", subsequent_indent="  "))
        out(_render([col], level, paint, legend=True, told_below=bool(first)))
    else:
        out("  (No crash matrix for this kind of level yet; the tests below are the verdict.)")
    out("")
    out(paint.bold("Tests") + f" (the same run as `pytest {_rel(level.starter_dir)}"
        + (f" --submission {_rel(folder)}`)" if folder.resolve() != level.starter_dir.resolve() else "`)"))
    if tests.problem:
        out("  " + tests.problem.replace("\n", "\n  "))
    for r in tests.results:
        mark = paint("✓", "32") if r.passed else paint("✗", "31") if r.outcome != "skipped" else "-"
        task = f"task {r.task}" if r.task is not None else "      "
        pts = f"{r.points:g} pt" if r.points is not None else ""
        # A test stopped because it would run stuck code again says so (its message is one line).
        stopped = "  not run: it calls the stuck code" if r.message.startswith("Not run:") \
            and " got stuck" in r.message.split(". ", 1)[0] else ""
        out(f"  {mark} {task}  {r.name.replace('test_', '', 1).replace('_', ' ')}" + (f"  ({pts})" if pts else "")
            + stopped)
    got, total = tests.points()
    if total:
        out(f"  {got:g} of {total:g} points")
    if first:
        out("")
        out(paint.bold("The first failure, in full"))
        out(wrap_block(first, matrix.terminal_width(), "  "))
    out("")
    if outcome.ok:
        out(paint(f"Level {level.number} passes: every test, and every crash state in the matrix.", "32"))
        if level.answers:
            out(level.answers_reminder(folder))
        later = [lv for lv in manifest_mod.load(level.root).existing() if lv.number > level.number]
        if later:
            out(f"Next: level {later[0].number}, {later[0].title} (crashcourse check {later[0].number}).")
    else:
        task = (tests.failing_tasks() or [1])[0]
        hinted = hint_task(level, tests)
        if stuck_words(tests):
            out("Not there yet: your code got stuck, and the first failure above says where. Once it returns, "
                f"crashcourse hint {level.number} finds the first task still failing.")
        elif hinted is None or hinted == task:
            out(f"Not there yet. For a nudge: crashcourse hint {level.number}   (task {task} is the first still "
                "failing)")
        else:
            cause = CAUSES.get(tests.first_causes()[0], "") if tests.first_causes() else ""
            out(f"Not there yet. For a nudge: crashcourse hint {level.number}   (task {task} fails first, but the "
                f"cause is task {hinted}'s: {cause})")
        if col is not None and tests.passed and col.failed:
            out("Note: the tests pass, but the crash matrix above shows a crash state that breaks a rule; the "
                "level counts as failing until both agree.")
    _remember_status(level, folder, outcome)
    return outcome


def _first_failure_text(outcome: CheckOutcome, tests: TestRun) -> str:
    col = outcome.column
    first_test = tests.first_failure()
    rerun = ""
    if first_test is not None:
        rerun = f'pytest "{_rel(outcome.level.root / first_test.nodeid)}"'
        if outcome.folder.resolve() != outcome.level.starter_dir.resolve():
            rerun += f" --submission {_rel(outcome.folder)}"
    if col is not None and col.stuck is not None:
        # Stuck code is the one thing to fix first; the tests (in their own process) met it too.
        told = next((r.message for r in tests.results if not r.passed and col.stuck.place
                     and col.stuck.place in r.message), "")
        return told.strip() or col.stuck.story + (f"\n  Re-run just this test: {rerun}" if rerun else "")
    if col is not None and col.exploration is not None and col.exploration.violations:
        # Explain the violation behind the first failing test, so the re-run command fits it: the
        # checks and the cause it recorded pick it; a test whose cause no crash state shows (the
        # file a finished run left) speaks for itself.
        named = {registry.split(c)[1] for c in first_test.checks} if first_test else set()
        if first_test and not named:
            named = set(re.findall(r"\b([A-Z][A-Z-]+) broken:", first_test.message))
        causes = first_test.causes if first_test else []
        v = next((v for v in col.exploration.violations if v.invariant in named and v.cause in causes), None)
        if v is None and causes and first_test is not None and " broken:" not in first_test.message:
            return first_test.message.strip() + (f"\n  Re-run just this test: {rerun}" if rerun else "")
        if v is None:
            v = next((v for v in col.exploration.violations if v.invariant in named), col.exploration.violations[0])
        if rerun and not v.rerun:
            v.rerun = rerun
        return v.explain()
    if col is not None and col.exploration is not None and (col.exploration.error or col.exploration.unseen):
        return col.exploration.report(rerun)
    if col is not None and col.extra_explain:
        return col.extra_explain + (f"\n  Re-run just this test: {rerun}" if rerun else "")
    if col is not None and col.problems:
        named = re.findall(r"\b([A-Z][A-Z-]+) broken:", first_test.message) if first_test else []
        check_id = next((c for c in col.problems if c in named), next(iter(col.problems)))
        message = col.problems[check_id]
        if hasattr(message, "explain"):
            if rerun and not message.rerun:
                message.rerun = rerun
            return message.explain()
        return message + (f"\n  Re-run just this test: {rerun}" if rerun else "")
    if first_test is not None:
        # (A message that ends with its own re-run command, as a stuck test's does, keeps just that one.)
        again = rerun and "Re-run just this" not in first_test.message
        return first_test.message.strip() + (f"\n  Re-run just this test: {rerun}" if again else "")
    return ""


def wrap_block(text: str, width: int, indent: str = "") -> str:
    """Wrap each line of ``text`` to ``width``, keeping its indent; commands stay on one line to copy."""
    out = []
    for line in text.splitlines():
        lead = indent + line[:len(line) - len(line.lstrip())]
        if "pytest " in line or len(indent + line) <= width:
            out.append(indent + line)
        else:
            out.extend(textwrap.wrap(line.strip(), width, initial_indent=lead, subsequent_indent=lead + "  ",
                                     break_on_hyphens=False))
    return "\n".join(out)


def hint_task(level: manifest_mod.Level, tests: TestRun) -> Optional[int]:
    """The task whose hints fit the first failure: the one its recorded cause belongs to (hints.md
    names them), else the first failing task; None when nothing fails."""
    failing = tests.failing_tasks()
    if not failing:
        return None
    tasks = manifest_mod.parse_hints(level.starter_dir / level.hints) if level.hints else []
    return manifest_mod.hint_task_for(tasks, tests.first_causes(), failing[0])


def _remember_status(level: manifest_mod.Level, folder: Path, outcome: CheckOutcome) -> None:
    status = _read_state("status.json")
    status[str(level.number)] = {"folder": str(folder.resolve()), "passed": outcome.ok,
                                 "failing_tasks": outcome.tests.failing_tasks(),
                                 "hint_task": hint_task(level, outcome.tests),
                                 "causes": outcome.tests.first_causes(),
                                 "stuck": stuck_words(outcome.tests),
                                 "files": files_signature(level.watched_files(folder))}
    _write_state("status.json", status)


def _level_or_say(number: int) -> Optional[manifest_mod.Level]:
    """The manifest's level ``number``, or None after saying why there is none."""
    try:
        return _manifest().require(number)
    except manifest_mod.ManifestError as exc:
        _say(str(exc))
        return None


def _folder_for(level: manifest_mod.Level, path: Optional[str]) -> Path:
    if path is None and level.root.resolve() == manifest_mod.PACKAGED_KIT.resolve():
        # No workspace around: the files are the installed package's own copies, not the learner's.
        _say("(No workspace here, so this reads the copy inside the installed package. For files of your own: "
             "crashcourse init my-course && cd my-course)", sys.stderr)
    return Path(path).resolve() if path else level.starter_dir


def cmd_check(args: argparse.Namespace) -> int:
    level = _level_or_say(args.level)
    if level is None:
        return 2
    folder = _folder_for(level, args.path)
    if not folder.is_dir():
        _say(f"--path {args.path}: there is no such folder.")
        return 2
    outcome = check_level(level, folder, examples=args.examples, seed=args.seed, paint=matrix.Painter())
    return 0 if outcome.ok else 1


# --- hint -----------------------------------------------------------------------------------------


def stuck_words(tests: TestRun) -> str:
    """The first lines of the first failure when it is code that got stuck (which function, where, the
    line), or "": no task's hints are about a loop that never returns."""
    first = tests.first_failure()
    if first is None or " got stuck: it was still running after " not in first.message.split("\n", 1)[0]:
        return ""
    return "\n".join(line for line in first.message.splitlines()[:3] if line.strip())


def _failing_task(level: manifest_mod.Level, folder: Path, tasks: list) -> tuple[Optional[int], list, str]:
    """The task to hint at (see :func:`hint_task`), the causes the first failure recorded, and where
    the code got stuck if it did (:func:`stuck_words`): from the last check if the files have not
    changed, else a fresh run."""
    status = _read_state("status.json").get(str(level.number))
    if status and status.get("files") == files_signature(level.watched_files(folder)) \
            and status.get("folder") == str(folder.resolve()):
        failing = status.get("failing_tasks") or []
        return (status.get("hint_task") or (failing[0] if failing else None), list(status.get("causes") or []),
                str(status.get("stuck") or ""))
    if not level.test_paths():
        return (tasks[0].number if tasks else None), [], ""
    print("(running the tests to see which task is still failing...)", file=sys.stderr)
    run = run_tests(level, folder, examples=3)
    if run.problem:
        return (tasks[0].number if tasks else None), [], ""
    return hint_task(level, run), run.first_causes(), stuck_words(run)


def hint_ladder(tasks: list, number: int, causes: list) -> tuple[manifest_mod.TaskHints, str, list]:
    """The task to hint at, the cause its hints are chosen for ('' if none), and the steps: the
    cause's own ladder when hints.md has one, else the task's."""
    task = next((t for t in tasks if t.number == number), tasks[0])
    cause = next((c for c in causes if c in task.causes and c in CAUSES), "")
    return task, cause, task.ladder(cause)


def _syntax_problem(level: manifest_mod.Level, folder: Path) -> str:
    """Why one of the level's files cannot even be compiled (a syntax error, as Python shows it), or ''.

    Hints about a task mean nothing while Python cannot read the file: every test fails for that
    one reason, and the first failing task is then only the first task."""
    for name in level.files:
        path = folder / name
        try:
            source = path.read_bytes()
        except OSError:
            continue
        try:
            compile(source, str(path), "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            if not isinstance(exc, SyntaxError):   # NUL bytes: no line to point at
                return f"{name} cannot be compiled: {exc}. Fix it, then re-run."
            return loader.import_problem(name, loader.describe_exception(exc, name))
    return ""


def cmd_hint(args: argparse.Namespace) -> int:
    level = _level_or_say(args.level)
    if level is None:
        return 2
    hints_path = level.starter_dir / level.hints
    tasks = manifest_mod.parse_hints(hints_path)
    state = _read_state("hints.json")
    key = str(level.number)
    if args.reset:
        state.pop(key, None)
        _write_state("hints.json", state)
        _say(f"Hints for level {level.number} start again from the first question.")
        return 0
    if not tasks:
        _say(f"Level {level.number} has no hints yet ({_rel(hints_path)} is missing or empty).")
        return 1
    causes: list = []
    width = matrix.terminal_width()
    if args.task is not None:
        number = args.task
        if all(t.number != number for t in tasks):
            listed = "; ".join(f"{t.number}. {t.title}" for t in tasks)
            _say(textwrap.fill(f"Level {level.number} has no task {number}. Its tasks: {listed}. For example: "
                               f"crashcourse hint {level.number} --task {tasks[0].number}", width), sys.stderr)
            return 2
    else:
        folder = _folder_for(level, args.path)
        problem = _syntax_problem(level, folder)
        if problem:
            _say(problem)
            _say()
            _say(textwrap.fill("No task's hints fit yet: until Python can read the file, every test fails for "
                               f"this one reason. Once it is fixed, `crashcourse hint {level.number}` finds the "
                               "first task that still fails.", width))
            return 1
        number, causes, stuck = _failing_task(level, folder, tasks)
        if stuck:
            _say(stuck)
            _say()
            _say(textwrap.fill("No task's hints fit yet: the tests that call that code stop until it returns. Look "
                               "at that line for a loop whose condition never changes, or a call that waits forever; "
                               f"once it returns, `crashcourse hint {level.number}` finds the first task that still "
                               "fails.", width))
            return 1
        if number is None:
            _say(textwrap.fill(f"Every test of level {level.number} passes, so there is nothing to hint at. "
                               f"(To read a task's hints anyway: crashcourse hint {level.number} --task 1.)",
                               matrix.terminal_width()))
            return 0
    task, cause, steps = hint_ladder(tasks, number, causes)
    # A cause with a ladder of its own keeps its own count: its steps are not the task's.
    counter = f"{task.number}:{cause}" if cause in task.by_cause else str(task.number)
    shown = state.setdefault(key, {})
    count = min(int(shown.get(counter, 0)) + 1, len(steps))
    shown[counter] = count
    _write_state("hints.json", state)
    paint = matrix.Painter()
    _say(paint.bold(f"Level {level.number}, task {task.number}: {task.title}") +
         f"   (hint {count} of {len(steps)})")
    if cause:  # say why these hints: the failure's cause, which may sit in another task than the test
        _say(textwrap.fill(f"Why this task: in the last check, {CAUSES[cause]}.", width))
    _say()
    for i, step in enumerate(steps[:count]):
        name = STEP_NAMES[i] if i < len(STEP_NAMES) else f"Hint {i + 1}"
        body = textwrap.fill(step, width, initial_indent="  ", subsequent_indent="  ")
        _say(("  " + name + ":") if i < count - 1 else paint.bold("  " + name + ":"))
        _say(body if i == count - 1 else paint(body, "2"))
        _say()
    if count < len(steps):
        again = f"crashcourse hint {level.number}" + (f" --task {task.number}" if args.task is not None else "")
        _say(f"Still stuck? Run `{again}` again for the next step.")
    else:
        _say(textwrap.fill(f"That was the last hint for task {task.number}. `crashcourse check {level.number}` "
                           f"explains the failure in full; `crashcourse hint {level.number} --reset` starts the "
                           "hints over.", width))
    return 0


# --- watch ----------------------------------------------------------------------------------------


def _watchdog_event(folder: Path) -> Any:
    """A threading.Event set on any change in ``folder`` if watchdog is installed, else None (poll only)."""
    try:
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer
    except ImportError:
        return None, None
    import threading

    event = threading.Event()

    class Handler(FileSystemEventHandler):
        def on_any_event(self, _: Any) -> None:
            event.set()

    observer = Observer()
    observer.schedule(Handler(), str(folder), recursive=False)
    observer.daemon = True
    observer.start()
    return event, observer


def watch_loop(paths: list[Path], on_change: Callable[[], Any], *, interval: float = 0.5,
               max_checks: Optional[int] = None, event: Any = None, sleep: Callable[[float], None] = time.sleep) -> int:
    """Call ``on_change()`` once, then again whenever a file in ``paths`` changes (mtime or size).

    Polls every ``interval`` seconds; if ``event`` (a threading.Event set by a file watcher) is given,
    it wakes up sooner. Stops after ``max_checks`` calls (for tests) or on Ctrl-C. Returns the checks made.
    """
    checks = 0
    last = files_signature(paths)
    try:
        on_change()
        checks += 1
        while max_checks is None or checks < max_checks:
            if event is not None:
                event.wait(interval)
                event.clear()
            else:
                sleep(interval)
            now = files_signature(paths)
            if now != last:
                last = now
                on_change()
                checks += 1
    except KeyboardInterrupt:
        print("\nStopped watching.")
    return checks


def _pick_watch_level(kit: manifest_mod.Manifest) -> Optional[manifest_mod.Level]:
    status = _read_state("status.json")
    existing = [lv for lv in kit.existing() if lv.test_paths()]
    for level in existing:
        if not status.get(str(level.number), {}).get("passed"):
            return level
    return existing[0] if existing else None


def cmd_watch(args: argparse.Namespace) -> int:
    try:
        kit = _manifest()
        level = kit.require(args.level) if args.level is not None else _pick_watch_level(kit)
    except manifest_mod.ManifestError as exc:
        _say(str(exc))
        return 2
    if level is None:
        _say("There is no level with tests to watch yet.")
        return 2
    folder = _folder_for(level, args.path)
    paths = level.watched_files(folder)
    paint = matrix.Painter()
    clear = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    event, observer = _watchdog_event(folder)

    def again() -> None:
        if clear:
            print("\033[2J\033[H", end="")
        outcome = check_level(level, folder, examples=args.examples, paint=paint)
        names = ", ".join(_rel(p) for p in paths if p.exists())
        print(f"\nWatching {names} (checks {'on every save' if event else f'every {args.interval:g} s'}); "
              "Ctrl-C to stop.")
        if outcome.ok:
            nxt = next((lv for lv in kit.existing() if lv.number > level.number), None)
            if nxt:
                print(f"Next: crashcourse watch {nxt.number}  ({nxt.title})")

    try:
        watch_loop(paths, again, interval=args.interval, max_checks=args.max_checks, event=event)
    finally:
        if observer is not None:
            observer.stop()
    return 0


# --- selfcheck ------------------------------------------------------------------------------------


LINE_NUMBER = re.compile(r"\blines?\s+\d+", re.IGNORECASE)


def level_problems(level: manifest_mod.Level) -> list[str]:
    """Static problems of one level folder: files, README tasks, hints, test markers."""
    out = []
    where = f"level {level.number}"
    for name in level.files:
        if not (level.solution_dir / name).is_file():
            out.append(f"{where}: the solution folder {level.solution}/ has no {name}")
    listed = [level.starter_dir / t for t in level.tests]
    absent = [p.name for p in listed if not p.is_file()]
    if absent:
        found = sorted(p.name for p in level.starter_dir.glob("test_*.py"))
        out.append(f"{where}: the manifest lists {', '.join(absent)} but {level.folder}/ holds "
                   f"{', '.join(found) or 'no test files'}")
    readme = level.starter_dir / level.readme
    tasks = manifest_mod.readme_tasks(readme)
    if not readme.is_file():
        out.append(f"{where}: {level.folder}/{level.readme} is missing")
    elif not tasks:
        out.append(f"{where}: {level.folder}/{level.readme} has no '## N. Title' task headings")
    elif [n for n, _ in tasks] != list(range(1, len(tasks) + 1)):
        out.append(f"{where}: README tasks are numbered {[n for n, _ in tasks]}, not 1, 2, 3, ...")
    hints_path = level.starter_dir / level.hints
    hints = {t.number: t for t in manifest_mod.parse_hints(hints_path)}
    if not hints_path.is_file():
        out.append(f"{where}: {level.folder}/{level.hints} is missing")
    else:
        for number, title in tasks:
            hint = hints.get(number)
            if hint is None:
                out.append(f"{where}: task {number} ({title}) has no hints")
                continue
            if hint.title.strip().lower() != title.strip().lower():
                out.append(f"{where}: hints for task {number} are titled {hint.title!r}, the README says {title!r}")
            if len(hint.steps) != 3:
                out.append(f"{where}: task {number} has {len(hint.steps)} hint bullets; it needs exactly 3 "
                           "(a question, a pointer, the API)")
            elif not hint.steps[0].rstrip().endswith("?"):
                out.append(f"{where}: the first hint of task {number} should be a question")
            for cause, ladder in hint.by_cause.items():
                if cause not in CAUSES:
                    out.append(f"{where}: task {number} has hints for the cause {cause!r}, which no check records")
                elif len(ladder) != 3 or not ladder[0].rstrip().endswith("?"):
                    out.append(f"{where}: the hints of task {number} for {cause!r} need exactly 3 bullets, the "
                               "first a question")
            for step in hint.steps + [s for ladder in hint.by_cause.values() for s in ladder]:
                if LINE_NUMBER.search(step):
                    out.append(f"{where}: a hint of task {number} cites a line number ({step[:50]!r}...); "
                               "line numbers change as the learner edits")
        extra = sorted(set(hints) - {n for n, _ in tasks})
        if extra and tasks:
            out.append(f"{where}: hints.md has tasks {extra} that the README does not")
    marked = manifest_mod.test_task_numbers(level.test_paths())
    unknown = sorted(marked - {n for n, _ in tasks})
    if tasks and unknown:
        out.append(f"{where}: tests are marked with task numbers {unknown} that the README does not have")
    return out


def engine_problems(level: manifest_mod.Level) -> tuple[list[str], str]:
    """What the matrix engine says about the starter (planted only) and the solution (clean)."""
    starter = level_column("starter", level.starter_dir, level)
    if starter is None:
        return [], "no matrix engine for this level; judged by its tests only"
    solution = level_column("solution", level.solution_dir, level)
    out = []
    tripped = starter.tripped
    planted = set(level.planted)
    if tripped != planted:
        more, less = sorted(tripped - planted), sorted(planted - tripped)
        parts = ([f"also breaks {', '.join(more)}"] if more else []) + ([f"no longer breaks {', '.join(less)}"]
                                                                         if less else [])
        out.append(f"level {level.number}: the starter should break exactly {', '.join(sorted(planted))}, "
                   f"but it {' and '.join(parts)}" + (f" ({starter.note})" if starter.note else ""))
    if solution.failed:
        # Columns of named checks (levels 1 and 4) list them; a loop's column sums its crash states up.
        what = ", ".join(sorted(solution.problems)) if solution.problems else solution.summary()
        out.append(f"level {level.number}: the solution fails the matrix: {what}")
    summary = f"starter breaks {', '.join(sorted(tripped)) or 'nothing'}; solution {'clean' if not solution.failed else 'FAILS'}"
    return out, summary


def cmd_selfcheck(args: argparse.Namespace) -> int:
    try:
        kit = _manifest()
    except manifest_mod.ManifestError as exc:
        _say(str(exc))
        return 1
    if kit.workspace:
        _say(f"selfcheck checks the kit itself, solutions included; {kit.root} is a learner's workspace, which has "
             "none. Run it outside this folder (it then checks the installed kit).")
        return 2
    paint = matrix.Painter()
    problems = [f"manifest: {p}" for p in manifest_mod.problems(kit)]
    notes = []
    jobs = []
    for level in kit.levels:
        if not level.exists():
            line = f"level {level.number}: {level.folder}/ is not there yet"
            (problems if args.strict else notes).append(line)
            continue
        problems.extend(level_problems(level))
        try:
            found, summary = engine_problems(level)
        except Exception as exc:  # noqa: BLE001 - report, keep checking the other levels
            found, summary = [f"level {level.number}: the matrix engine raised {type(exc).__name__}: {exc}"], "error"
        problems.extend(found)
        notes.append(f"level {level.number}: {summary}")
        if level.test_paths() and not args.no_tests:
            jobs.append((level, "starter", level.starter_dir))
            jobs.append((level, "solution", level.solution_dir))
    if jobs:
        _say(f"Running the tests of {len(jobs) // 2} level(s) on their starters and solutions...")
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            runs = list(pool.map(lambda job: run_tests(job[0], job[2], examples=args.examples), jobs))
        for (level, which, _), run in zip(jobs, runs):
            if run.problem and run.returncode != 1:
                problems.append(f"level {level.number}: the tests could not run on the {which}: "
                                f"{run.problem.splitlines()[0]}")
            elif which == "starter" and run.passed:
                problems.append(f"level {level.number}: the starter passes every test; it should fail")
            elif which == "solution" and not run.passed:
                names = ", ".join(r.name for r in run.results if not r.passed)
                problems.append(f"level {level.number}: the solution fails {names or 'the tests'}")
            else:
                got, total = run.points()
                notes.append(f"level {level.number}: {which} tests {'fail as they should' if which == 'starter' else 'pass'}"
                             + (f" ({got:g} of {total:g} points)" if total else ""))
    for note in notes:
        _say(textwrap.fill(note, matrix.terminal_width(), initial_indent="  ", subsequent_indent="    "))
    if problems:
        _say()
        _say(paint(f"selfcheck found {len(problems)} problem(s):", "31"))
        for p in problems:
            _say(textwrap.fill(p, matrix.terminal_width(), initial_indent="  - ", subsequent_indent="    "))
        return 1
    _say(paint("selfcheck: every level present is in order.", "32"))
    return 0


# --- run ------------------------------------------------------------------------------------------


class RunStopped(BaseException):
    """``run --stop-at-tool K``: the run is cut off as a kill would cut it (a BaseException, so a loop's
    ``except Exception`` cannot swallow it)."""


def _show_response(response: dict) -> None:
    for block in response.get("content") or []:
        if block.get("type") == "text" and block.get("text"):
            text = block["text"].strip().replace("\n", " ")
            print(f"  model: {text[:150]}{'…' if len(text) > 150 else ''}")
        elif block.get("type") == "tool_use":
            args = json.dumps(block.get("input"))
            print(f"  model asks for {block['name']}({args[:80]}{'…' if len(args) > 80 else ''})")
        elif block.get("type") in ("thinking", "redacted_thinking"):
            print("  model thinks (a thinking block: it goes back to the API as it came)")
    if response.get("stop_reason") not in ("tool_use", "end_turn", None):
        print(f"  stop_reason: {response.get('stop_reason')}")


def _short(value: Any, width: int = 90) -> str:
    if isinstance(value, str):
        value = " ".join(value.split())  # one line, whatever the text's own line breaks
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[:width - 1] + "…"


def _last_message_words(messages: Any) -> str:
    """The last message of a checkpoint in a few words, and whether it leaves a call unanswered."""
    if not isinstance(messages, list) or not messages:
        return "no messages"
    last = messages[-1]
    if not isinstance(last, dict):
        return f"not a message: {_short(last, 60)}"
    content = last.get("content")
    if isinstance(content, str):
        return f"{last.get('role')}: {_short(content, 70)}"
    parts, calls = [], []
    for block in content if isinstance(content, list) else []:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.append(f"text {_short(block.get('text', ''), 50)}")
        elif kind == "tool_use":
            parts.append(f"tool_use {block.get('name')}")
            calls.append(block.get("name"))
        elif kind == "tool_result":
            parts.append("tool_result")
        else:
            parts.append(str(kind))
    words = f"{last.get('role')}: {', '.join(parts) or 'empty'}"
    if last.get("role") == "assistant" and calls:
        words += (f" (the call to {', '.join(map(str, calls))} has no tool_result after it: the API refuses this "
                  "conversation until one is added, so a resume must answer it first)")
    return words


def _state_summary(state: Any) -> list[str]:
    if not isinstance(state, dict):
        return [f"not a checkpoint object: {_short(state, 60)}"]
    messages = state.get("messages")
    count = len(messages) if isinstance(messages, list) else "?"
    return [f"turns={state.get('turns')}, tokensUsed={state.get('tokensUsed')}, {count} messages, "
            f"pendingToolUse={_short(state.get('pendingToolUse'), 70)}",
            f"last message: {_last_message_words(messages)}"]


def describe_checkpoint(directory: Path, level: manifest_mod.Level, module: Any, finished: bool = True) -> list[str]:
    """What the run left in ``directory``, in a few lines: the file (or the level's own files) and its state.

    ``finished`` says whether the loop returned: one that did should have saved, one that was
    stopped may have been stopped before its first save.
    """
    nothing = ("did run_agent save to the directory it was given?" if finished else
               "the run stopped before a first save was complete.")
    if level.plugin.own_loader:
        # Level 6 keeps its state in files of the learner's choosing: list them, then ask the
        # learner's own loader what they add up to.
        files = sorted(p for p in directory.rglob("*") if p.is_file()) if directory.is_dir() else []
        if not files:
            return [f"No files in {_rel(directory)}: {nothing}"]
        lines = [f"Files your loop left in {_rel(directory)}:"]
        lines += [f"  {p.relative_to(directory)}  ({p.stat().st_size:,} bytes)" for p in files[:12]]
        if len(files) > 12:
            lines.append(f"  … and {len(files) - 12} more")
        load = getattr(module, "load_checkpoint", None)
        if load is None:
            return lines + ["Your file has no load_checkpoint(directory), so what they hold cannot be read back."]
        try:
            state = load(str(directory))
        except Exception as exc:  # noqa: BLE001 - the learner's loader, reported as it failed
            return lines + [f"Your load_checkpoint raised {type(exc).__name__}: {exc}"]
        if state is None:
            return lines + ["Your load_checkpoint returned None: no save had completed."]
        return lines + ["What your load_checkpoint makes of them:"] + [f"  {line}" for line in _state_summary(state)]
    path = directory / "checkpoint.json"
    if not path.is_file():
        return [f"No checkpoint at {_rel(path)}: {nothing}"]
    size = path.stat().st_size
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        return [f"Checkpoint left on disk: {_rel(path)} ({size:,} bytes), but it is not valid JSON ({exc})."]
    return [f"Checkpoint left on disk: {_rel(path)} ({size:,} bytes):"] + [f"  {line}" for line in _state_summary(data)]


def _prepare_folder(directory: Path, chosen: bool) -> Optional[str]:
    """Give the run an empty folder: the kit's own is emptied; one the learner chose must be empty already."""
    if not directory.exists():
        return None
    if not directory.is_dir():
        return f"{_rel(directory)} is a file, not a folder: pick another --directory."
    if not chosen:
        shutil.rmtree(directory)  # the kit's own folder: last run's files would mix with this run's
        return None
    left = sorted(p.name for p in directory.iterdir())
    if left:
        shown = ", ".join(left[:5]) + (" …" if len(left) > 5 else "")
        return (f"{_rel(directory)} already holds {shown}. A run starts in "
                "an empty folder, so that what you see afterwards is this run's alone: empty it, or pick another "
                "--directory.")
    return None


def _refuse_run_options(args: argparse.Namespace) -> Optional[str]:
    if args.max_tokens < 1:
        return f"--max-tokens must be at least 1 (got {args.max_tokens}): the API refuses a request with less."
    if args.timeout <= 0:
        return f"--timeout must be more than 0 seconds (got {args.timeout:g})."
    if args.retries < 0:
        return f"--retries cannot be negative (got {args.retries})."
    if args.stop_at_tool is not None and args.stop_at_tool < 1:
        return f"--stop-at-tool counts tool calls from 1 (got {args.stop_at_tool})."
    return None


@dataclass
class _Driver:
    """What a run hands the learner's loop: the model, the tools, and (live) what to read afterwards."""

    call_model: Callable[..., dict]
    run_tool: Callable[[str, Any], str]
    tools: list
    caller: Any = None  # the LiveModel of a live run
    desk: Any = None  # the live run's TicketDesk


def _live_driver(args: argparse.Namespace, parallel: bool, filename: str) -> _Driver:
    from grader.faces import live

    caller = live.LiveModel(live.default_client(), args.model, max_tokens=args.max_tokens, parallel_tools=parallel,
                            timeout=args.timeout, retries=args.retries, on_response=_show_response)
    note = live.model_note(args.model)
    if note:
        print(note)
    print(f"Running {filename} with {args.model} over the real Messages API (a few cents at most)...")
    choice = ("tool calls in parallel allowed (no tool_choice)" if parallel else
              f"one tool call per turn (tool_choice={json.dumps(live.ONE_CALL_PER_TURN)})")
    print(f"  each request: max_tokens={args.max_tokens}, {choice}; the whole run has {args.timeout:g} s")
    desk = live.TicketDesk(seed=0 if args.seed is None else args.seed)  # the stand-in tools: as before
    return _Driver(caller, desk, live.task_tools(parallel), caller, desk)


def _scripted_driver(args: argparse.Namespace, parallel: bool, filename: str) -> _Driver:
    from grader.engine.scripted import DEFAULT_SEED, support_tickets

    seed = DEFAULT_SEED if args.seed is None else args.seed
    if parallel:
        from grader.levels.parallel_calls import parallel_tickets

        scenario = parallel_tickets(seed)  # the level's own scenario: turns of several calls at once
    else:
        scenario = support_tickets(seed)
    model = scenario.model()
    print(f"Running {filename} on the scripted model (add --live for the real API)...")

    def call_model(**kwargs: Any) -> dict:
        response = model(**kwargs)
        _show_response(response)
        return response

    return _Driver(call_model, scenario.executor(), scenario.tools)


def _why_it_stopped(exc: BaseException, args: argparse.Namespace, verb: str) -> tuple[str, int]:
    """The line that says why a run stopped early, and the exit status that goes with it."""
    from grader.faces import live

    if isinstance(exc, RunStopped):
        return (f"The run was stopped as a crash would stop it, as tool call {args.stop_at_tool} began "
                "(--stop-at-tool).", 3)
    if isinstance(exc, KeyboardInterrupt):
        return "The run was stopped (Ctrl-C).", 130
    if isinstance(exc, live.LiveError):
        return f"The run stopped: {exc}", 1
    if isinstance(exc, live.TooManyCalls):
        return f"The run stopped: {exc}.", 1
    return f"The run stopped: your {verb} raised {type(exc).__name__}: {exc}", 1


def cmd_run(args: argparse.Namespace) -> int:
    from grader.faces import live
    from grader.engine.checkpoint import spend
    from grader.engine.scripted import TICKET_TASK

    level = _level_or_say(args.level)
    if level is None:
        return 2
    folder = _folder_for(level, args.path)
    resuming = level.function == "resume_agent"
    if level.function != "run_agent" and not resuming:
        _say(f"Level {level.number}'s file has no loop to drive (it grades {level.function}); `crashcourse run` works "
             "on the levels whose file is an agent loop ("
             + ", ".join(str(lv.number) for lv in _manifest().levels if lv.function == "run_agent")
             + ") and on level 4's resume.")
        return 2
    refused = _refuse_run_options(args)
    if refused:
        _say(refused)
        return 2
    if args.live:
        try:
            live.check_available()
        except live.LiveUnavailable as exc:
            _say(str(exc))
            return 2
    try:
        module = matrix.load_module(folder / level.files[0], "run")
    except loader.ImportProblem as exc:
        _say(str(exc))
        return 1
    directory = Path(args.directory).resolve()
    if resuming:
        if not (directory / "checkpoint.json").is_file():
            _say(f"There is no checkpoint at {_rel(directory / 'checkpoint.json')} to resume. Leave one with a run "
                 "that stops partway, e.g. `crashcourse run 2 --stop-at-tool 2` (add --live for the real API), then "
                 "run this again.")
            return 2
    else:
        problem = _prepare_folder(directory, chosen=args.directory != DEFAULT_RUN_DIR)
        if problem:
            _say(problem)
            return 2
    parallel = level.plugin.several_calls
    setup = _live_driver if args.live else _scripted_driver
    try:
        driver = setup(args, parallel, _rel(folder / level.files[0]))
    except Exception as exc:  # noqa: BLE001 - the SDK could not build a client from this environment
        _say(f"The live run could not start: {type(exc).__name__}: {exc}")
        return 2
    started = {"tools": 0}

    def execute_tool(name: str, tool_input: Any, **_: Any) -> str:
        started["tools"] += 1
        if started["tools"] == args.stop_at_tool:
            raise RunStopped()
        result = driver.run_tool(name, tool_input)
        print(f"  tool {name} -> {len(result):,} characters")
        return result

    verb = "resume_agent" if resuming else "run_agent"
    state, status = None, 0
    try:
        if resuming:
            print(f"  resuming the task in {_rel(directory / 'checkpoint.json')}")
            state = module.resume_agent(driver.tools, driver.call_model, execute_tool, str(directory))
        else:
            print(f"  task: {TICKET_TASK}")
            state = module.run_agent(TICKET_TASK, driver.tools, driver.call_model, execute_tool, str(directory))
        for table in driver.desk.published if driver.desk else []:
            print("\nThe table the model published:\n" + textwrap.indent(table.strip(), "  "))
    except (Exception, KeyboardInterrupt, RunStopped) as exc:  # noqa: BLE001 - said in one line, then the disk
        line, status = _why_it_stopped(exc, args, verb)
        print("\n" + line)
    # However the run ended, what it left on disk is the point: show it.
    print()
    for line in describe_checkpoint(directory, level, module, finished=status == 0):
        print(line)
    if isinstance(state, dict):
        print(f"{verb} returned turns={state.get('turns')}, tokensUsed={state.get('tokensUsed')}.")
    last = driver.caller.last_response if driver.caller is not None else None
    if last is not None:
        # The two numbers the lesson keeps apart: how full the context was, and what the run spent.
        usage = last.get("usage") or {}
        context = sum(usage.get(k) or 0 for k in ("input_tokens", "cache_creation_input_tokens",
                                                   "cache_read_input_tokens"))
        spent = sum(spend(r) for r in driver.caller.responses)
        print(f"The last call's input was {context:,} tokens (the context's size then); all "
              f"{len(driver.caller.responses)} calls together spent {spent:,} (what tokensUsed counts).")
    if status == 0 and driver.caller is not None and not (resuming and last is None):
        why = live.unfinished(last, args.max_tokens)
        if why:
            print(f"The run did not finish: {why}. The checkpoint above is what it left.")
            status = 1
    if status == 3:
        print("To carry the task on from here: crashcourse run 4" + (" --live" if args.live else "")
              + (f" --directory {args.directory}" if args.directory != DEFAULT_RUN_DIR else ""))
    print(f"To see what a crash at each point would leave: crashcourse check {level.number}")
    return status


# --- registration ---------------------------------------------------------------------------------


def _wrapped(parser_factory: Callable) -> Callable:
    """``sub.add_parser`` that wraps each description paragraph to 80 columns (examples kept as written)."""
    def add_parser(name: str, **kwargs: Any) -> Any:
        text = kwargs.get("description")
        if text:
            parts = text.split("\n\n")
            parts = [p if p.startswith(("example", "  ")) else textwrap.fill(p, 80) for p in parts]
            kwargs["description"] = "\n\n".join(parts)
        return parser_factory(name, **kwargs)
    return add_parser


def register(sub: Any) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    sub = argparse.Namespace(add_parser=_wrapped(sub.add_parser))

    p = sub.add_parser("demo", help="the crash matrix of each level's starter beside its solution",
                       description="Show, for each level, where a crash lands in the broken starter and in the "
                                   "solution, and what a resume would find there. Scripted model: no network, no key.",
                       formatter_class=fmt)
    p.add_argument("level", nargs="?", type=int, help="show only this level")
    p.set_defaults(handler=cmd_demo)

    p = sub.add_parser("check", help="grade your files for level N: tests, crash matrix, first failure in full",
                       description="Run level N's tests on your files (the same run as `pytest exercises/levelN`), "
                                   "draw your loop's crash matrix, and explain the first failure in full. Exits 0 only "
                                   "when everything passes.\n\nexample:\n  crashcourse check 2\n"
                                   "  crashcourse check 2 --path ~/my-attempt", formatter_class=fmt)
    p.add_argument("level", type=int, help="the level number (see crashcourse demo)")
    p.add_argument("--path", metavar="DIR", help="the folder holding your files (default: exercises/levelN)")
    p.add_argument("--examples", type=int, metavar="N", help="generated conversations per property test")
    p.add_argument("--seed", type=int, metavar="N", help="the scripted model's seed (default: the plugin's)")
    p.set_defaults(handler=cmd_check)

    p = sub.add_parser("hint", help="the next hint for the first task still failing",
                       description="Hints come in three steps per task: a question, then where to look, then the API "
                                   "to reach for. Each call shows one more step of the first task that still fails.",
                       formatter_class=fmt)
    p.add_argument("level", type=int, help="the level number")
    p.add_argument("--task", type=int, metavar="K", help="hints for task K instead of the first failing one")
    p.add_argument("--reset", action="store_true", help="forget which hints were shown for this level")
    p.add_argument("--path", metavar="DIR", help="the folder holding your files (default: exercises/levelN)")
    p.set_defaults(handler=cmd_hint)

    p = sub.add_parser("watch", help="check again every time you save (Ctrl-C stops)",
                       description="Runs `crashcourse check` on the level, then again whenever one of its files "
                                   "changes. Without N, watches the first level that does not pass yet.",
                       formatter_class=fmt)
    p.add_argument("level", nargs="?", type=int, help="the level number (default: the first not passing yet)")
    p.add_argument("--path", metavar="DIR", help="the folder holding your files (default: exercises/levelN)")
    p.add_argument("--interval", type=float, default=0.5, metavar="S", help="seconds between looks at the files")
    p.add_argument("--examples", type=int, metavar="N", help="generated conversations per property test")
    p.add_argument("--max-checks", type=int, metavar="N", help=argparse.SUPPRESS)
    p.set_defaults(handler=cmd_watch)

    p = sub.add_parser("selfcheck", help="(maintainers) every starter fails as planted, every solution passes",
                       description="Checks the kit itself: the manifest is ordered with unique names; each level "
                                   "present has its files, README tasks and three hints per task; each starter breaks "
                                   "exactly what it is planted to break; each solution passes its tests.",
                       formatter_class=fmt)
    p.add_argument("--strict", action="store_true", help="count levels that are not there yet as problems")
    p.add_argument("--no-tests", action="store_true", help="skip running the level tests (faster)")
    p.add_argument("--examples", type=int, metavar="N", help="generated conversations per property test")
    p.set_defaults(handler=cmd_selfcheck)

    from grader.faces import live

    p = sub.add_parser("run", help="run your loop once (scripted, or --live with the real API)",
                       description="Run your level-N loop on the course's task and show the conversation and what "
                                   "it left on disk, however the run ends. Each run starts in an empty folder. "
                                   "`run 4` resumes the checkpoint an earlier run left there (stop one partway with "
                                   "--stop-at-tool).\n\n"
                                   "With --live it talks to the real Messages API: it needs the SDK (pip install "
                                   "anthropic) and ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN. Each request carries "
                                   "the model, max_tokens, the task's tools and the conversation; levels whose loop "
                                   "answers one tool call per turn also send tool_choice "
                                   '{"type": "auto", "disable_parallel_tool_use": true}, level 5 does not.\n\n'
                                   "Exit status: 0 when the model finished the task (stop_reason end_turn); 1 when "
                                   "the run stopped early or the model stopped for another reason; 2 when the run "
                                   "could not start; 3 after --stop-at-tool; 130 after Ctrl-C.\n\n"
                                   "example:\n  crashcourse run 2\n  crashcourse run 2 --live\n"
                                   "  crashcourse run 2 --live --stop-at-tool 2; crashcourse run 4 --live",
                       formatter_class=fmt)
    p.add_argument("level", type=int, help="the level number (one whose file has run_agent, or 4 to resume)")
    p.add_argument("--live", action="store_true", help="use the real Messages API instead of the scripted model")
    p.add_argument("--model", default=os.environ.get("CRASHCOURSE_MODEL") or live.DEFAULT_MODEL,
                   help=f"model for --live (default {live.DEFAULT_MODEL}, or $CRASHCOURSE_MODEL)")
    p.add_argument("--max-tokens", type=int, default=live.DEFAULT_MAX_TOKENS, metavar="N",
                   help=f"max_tokens of each --live request, thinking included (default {live.DEFAULT_MAX_TOKENS})")
    p.add_argument("--timeout", type=float, default=live.DEFAULT_TIMEOUT, metavar="S",
                   help=f"seconds the whole --live run may take, retries included (default {live.DEFAULT_TIMEOUT:g})")
    p.add_argument("--retries", type=int, default=live.DEFAULT_RETRIES, metavar="N",
                   help="times a --live call is tried again after a 429, a 5xx or a dropped connection, within "
                        f"--timeout (default {live.DEFAULT_RETRIES})")
    p.add_argument("--stop-at-tool", type=int, metavar="K",
                   help="stop the run as a crash would, as the K-th tool call starts (for run 4 to resume)")
    p.add_argument("--directory", default=DEFAULT_RUN_DIR, metavar="DIR",
                   help="where the loop writes its checkpoint (default: the kit's own folder, emptied each run)")
    p.add_argument("--path", metavar="DIR", help="the folder holding your files (default: exercises/levelN)")
    p.add_argument("--seed", type=int, default=None, metavar="N",
                   help="seed of the scripted task (default: the plugin's, so the run is the one pytest and check judge)")
    p.set_defaults(handler=cmd_run)
