"""A level's tests run as ``pytest exercises/levelN`` runs them, and read back as data.

This module is also a tiny pytest plugin (``-p grader.faces.student.testrun``): when
CRASHCOURSE_REPORT names a file, each test's outcome, task, points and failure text are appended to
it as JSON lines. That is how ``check``, ``hint`` and ``selfcheck`` read the very same test run that
``pytest`` shows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from grader.engine import recorder
from grader.grading.outcomes import Outcome, Outcomes
from grader.levels import manifest as manifest_mod

TEST_TIMEOUT = 300


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


def _pytest_args(level: manifest_mod.Level, folder: Path, examples: Optional[int], seed: Optional[int],
                 here: Optional[str] = None) -> list:
    """pytest's arguments for the level's tests on ``folder``; ``here``: where the learner typed the command
    (pytest itself runs from the level's root), which the re-run lines are written for."""
    args = [*[str(t) for t in level.test_paths()], "--submission", str(folder), "-q", "-p", "no:cacheprovider",
            "--color=no", "--crashcourse-rerun-from", here or os.getcwd()]
    if examples is not None:
        args += ["--crashcourse-examples", str(examples)]
    if seed is not None:
        args += ["--crashcourse-seed", str(seed)]
    return args


def collect_args(level: manifest_mod.Level, folder: Path) -> list:
    """pytest's arguments to collect the level's tests without running them (``watch``'s warm-up)."""
    return [*_pytest_args(level, folder, None, None), "--collect-only"]


def _read_report(report: Path, returncode: int, output: str) -> TestRun:
    results = []
    if report.exists():
        for line in report.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            results.append(TestResult(r["nodeid"], r["outcome"], r["task"], r["points"], r["message"],
                                      r.get("checks") or [], r.get("causes") or []))
    run = TestRun(returncode, results, output)
    if returncode not in (0, 1) or (returncode == 1 and not any(not r.passed for r in results)):
        tail = "\n".join(run.output.strip().splitlines()[-15:])
        run.problem = f"pytest could not run the tests (exit status {returncode}):\n{tail}"
    return run


def slow_code_sink(fd: int) -> Any:
    """Tell ``fd`` (the screen) when a call into the learner's code has run long; returns the undo."""
    from grader.engine import hangs

    # The line is said from inside the learner's call (the alarm that times it), while their loop may
    # be recorded: through the recorder's os.write it entered their trace as a write to a descriptor
    # they never opened, and the run was refused as unseen (task 3 of level 6 failed under check,
    # never under pytest, whenever a long run passed 2 s). The grader's own pipe: the real os.write.
    write = recorder.real_os("write")

    def say(line: str) -> None:
        try:
            write(fd, f"  ... {line}\n".encode("utf-8", "replace"))
        except OSError:
            pass
    return hangs.on_slow_loop(say)


def run_tests_here(level: manifest_mod.Level, folder: Path, *, examples: Optional[int] = None,
                   seed: Optional[int] = None) -> TestRun:
    """The level's tests on ``folder``, run by pytest in this process: the same run as :func:`run_tests`
    without starting an interpreter and importing pytest, Hypothesis and the kit again.

    Only for a process that exists for this one run (``watch`` forks one per save from a warm
    parent that never imported the learner's code): pytest's output goes to a file, not the screen.
    """
    import pytest

    if not level.test_paths():
        return TestRun(2, problem=f"{level.folder}/ has no test files yet, so there is nothing to check against.")
    with tempfile.TemporaryDirectory(prefix="crashcourse-check-") as tmp:
        report, shown = Path(tmp) / "report.jsonl", Path(tmp) / "output.txt"
        here, saved = os.getcwd(), (os.dup(1), os.dup(2))
        sys.stdout.flush()
        sys.stderr.flush()
        fd = os.open(shown, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        # sys.dont_write_bytecode stays as this run has it, as under the learner's own pytest: code
        # that saves one way when it is set and another when not earns the same from both.
        # While the learner waits on code that runs long, say so on the screen (pytest's own output,
        # this line's included, goes to the file).
        quiet = slow_code_sink(saved[0])
        for test in level.test_paths():
            # A test module of the same name from another folder (another level, another copy of the
            # kit) would make pytest refuse to collect this one: "import file mismatch".
            seen = sys.modules.get(Path(test).stem)
            if seen is not None and os.path.realpath(getattr(seen, "__file__", "") or "") != os.path.realpath(test):
                del sys.modules[Path(test).stem]
        try:
            os.chdir(level.root)
            code = pytest.main(_pytest_args(level, folder, examples, seed, here), plugins=[ReportFile(str(report))])
        finally:
            quiet()
            sys.stdout.flush()
            sys.stderr.flush()
            os.chdir(here)
            for target, fd in zip((1, 2), saved):
                os.dup2(fd, target)
                os.close(fd)
        return _read_report(report, int(code), shown.read_text(encoding="utf-8", errors="replace"))


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
        cmd = [sys.executable, "-m", "pytest", *_pytest_args(level, folder, examples, seed), "-p",
               "grader.faces.student.testrun"]
        env = dict(os.environ, CRASHCOURSE_REPORT=str(report))  # byte-code caching as the learner has it
        try:
            # Same process group on purpose: Ctrl-C in `watch` stops this pytest too, at once.
            proc = subprocess.run(cmd, cwd=str(level.root), env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return TestRun(124, problem=f"the tests were still running after {timeout:g} s; does the loop wait "
                                        "forever somewhere?")
        return _read_report(report, proc.returncode, proc.stdout + proc.stderr)


def hint_task(level: manifest_mod.Level, tests: TestRun) -> Optional[int]:
    """The task whose hints fit the first failure: the one its recorded cause belongs to (hints.md
    names them), else the first failing task; None when nothing fails."""
    failing = tests.failing_tasks()
    if not failing:
        return None
    tasks = manifest_mod.parse_hints(level.starter_dir / level.hints) if level.hints else []
    return manifest_mod.hint_task_for(tasks, tests.first_causes(), failing[0])



def stuck_words(tests: TestRun) -> str:
    """The first lines of the first failure when it is code that got stuck (which function, where, the
    line), or "": no task's hints are about a loop that never returns."""
    first = tests.first_failure()
    if first is None or " got stuck: it was still running after " not in first.message.split("\n", 1)[0]:
        return ""
    return "\n".join(line for line in first.message.splitlines()[:3] if line.strip())
