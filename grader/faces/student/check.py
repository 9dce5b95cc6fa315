"""``crashcourse check N [--path DIR]``: the level's tests on your files (the same tests as
``pytest exercises/levelN``) and the crash matrix of your loop; the first failure explained in
full. Exit status 0 only when all pass."""

from __future__ import annotations

import argparse
import concurrent.futures
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from grader.engine import hangs
from grader.engine.scripted import DEFAULT_SEED
from grader.faces import matrix
from grader.faces.student import testrun
from grader.faces.student.common import (cause_words, engine_words, files_signature, folder_for, level_column, level_heading,
                                         level_or_say, read_state, rel, render, say, wrap_block, write_state)
from grader.faces.student.testrun import TestRun, hint_task, stuck_words
from grader.levels import manifest as manifest_mod
from grader.levels.api import tests_and_column_share


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
                paint: Optional[matrix.Painter] = None, here: bool = False) -> CheckOutcome:
    """Run the level's tests and draw the crash matrix for ``folder``; print the lot through ``out``.

    ``here``: run the tests in this process, then the matrix (``watch``, in a child forked for this one
    check): no interpreter to start, and code that gets stuck is waited for once, since the matrix
    then refuses what the tests found stuck."""
    paint = paint or matrix.Painter(enabled=False)
    out(level_heading(level, paint))
    files = ", ".join(rel(folder / name) for name in level.files)
    out(f"  checking {files}")
    missing = [name for name in level.files if not (folder / name).is_file()]
    if missing:
        out(f"\n  There is no {', '.join(missing)} in {rel(folder)}. The level grades a file with exactly that name.")
        return CheckOutcome(level, folder, None, TestRun(2, problem="missing file"))
    col, tests = (_tests_then_column if here else _tests_and_column)(level, folder, examples, seed, out)
    outcome = CheckOutcome(level, folder, col, tests)
    first = _first_failure_text(outcome, tests)
    if col is not None and col.exploration is None and "\n" in col.note and first \
            and first.splitlines()[0].strip() == col.note.splitlines()[0].strip():
        # A file that will not import: its error is shown once, in full, as the first failure below.
        col.note = col.note.splitlines()[0].rstrip(":") + " (shown in full below)"
    out("")
    _show_column(level, col, paint, bool(first), out)
    out("")
    _show_tests(level, folder, tests, paint, out)
    if first:
        out("")
        out(paint.bold("The first failure, in full"))
        out(wrap_block(first, matrix.terminal_width(), "  "))
    out("")
    _show_verdict(outcome, paint, out)
    _remember_status(level, folder, outcome)
    return outcome


def _tests_and_column(level: manifest_mod.Level, folder: Path, examples: Optional[int], seed: Optional[int],
                      out: Callable[[str], None]) -> tuple[Optional[matrix.Column], TestRun]:
    """The level's column for ``folder``, drawn here, and its tests, run meanwhile in their own process."""
    # The tests run in their own process while the matrix is drawn here (it needs the main thread
    # for its time limit), so a check takes as long as the slower of the two.
    hangs.forget_hangs()  # a fresh verdict: code that got stuck in an earlier check (in `watch`) runs again
    # While the learner's code runs long, say so at once (the tests' own process is captured).
    quiet = hangs.on_slow_loop(lambda line: out(f"  ... {line}"))
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(testrun.run_tests, level, folder, examples=examples, seed=seed)
        try:
            # The plugin's seed, so the matrix shows the very run the tests judged.
            col = level_column("your code", folder, level, DEFAULT_SEED if seed is None else seed)
        except Exception as exc:  # noqa: BLE001 - the tests still give the verdict
            col = matrix.failed_column("your code", f"the matrix could not be drawn ({type(exc).__name__}: {exc})")
        finally:
            quiet()
        return col, pending.result()


def _tests_then_column(level: manifest_mod.Level, folder: Path, examples: Optional[int], seed: Optional[int],
                       out: Callable[[str], None]) -> tuple[Optional[matrix.Column], TestRun]:
    """The level's tests, run in this process, then its column: one after the other, so a function the
    tests found stuck is refused at once in the matrix (hangs are remembered per process)."""
    hangs.forget_hangs()
    mark = hangs.hang_mark()
    with tests_and_column_share():  # what the column would explore again, the tests have explored already
        tests = testrun.run_tests_here(level, folder, examples=examples, seed=seed)  # (it tells of slow code itself)
        stopped = [hang for kind, hang in hangs.hangs_since(mark) if kind == "stopped"]
        quiet = hangs.on_slow_loop(lambda line: out(f"  ... {line}"))
        try:
            try:
                col = level_column("your code", folder, level, DEFAULT_SEED if seed is None else seed)
            except Exception as exc:  # noqa: BLE001 - the tests still give the verdict
                col = matrix.failed_column("your code", f"the matrix could not be drawn ({type(exc).__name__}: {exc})")
        finally:
            quiet()
    if col is not None and stopped and hasattr(col, "stuck"):
        # The matrix was refused what the tests found stuck (it would have got stuck there itself):
        # the story is the tests' stop, told once.
        col.stuck = stopped[0]
    return col, tests


def _show_column(level: manifest_mod.Level, col: Optional[matrix.Column], paint: matrix.Painter, told_below: bool,
                 out: Callable[[str], None]) -> None:
    if col is None:
        out("  (No crash matrix for this kind of level yet; the tests below are the verdict.)")
        return
    words = engine_words(level)
    if words:
        out(textwrap.fill(words, matrix.terminal_width(), initial_indent="  ", subsequent_indent="  "))
    out(render([col], level, paint, legend=True, told_below=told_below))


def _show_tests(level: manifest_mod.Level, folder: Path, tests: TestRun, paint: matrix.Painter,
                out: Callable[[str], None]) -> None:
    """Each test's mark, task, name and points, as ``pytest`` ran them, and the points in all."""
    out(paint.bold("Tests") + f" (the same run as `pytest {rel(level.starter_dir)}"
        + (f" --submission {rel(folder)}`)" if folder.resolve() != level.starter_dir.resolve() else "`)"))
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


def _show_verdict(outcome: CheckOutcome, paint: matrix.Painter, out: Callable[[str], None]) -> None:
    """The level passes (and what is next), or what to run for a nudge."""
    level, tests, col = outcome.level, outcome.tests, outcome.column
    if outcome.ok:
        # The column's words for what it holds (a loop's crash states, a level's named checks).
        holds = f", and {col.meaning.passes}" if col is not None else ""
        out(paint(f"Level {level.number} passes: every test{holds}.", "32"))
        if level.answers:
            out(level.answers_reminder(outcome.folder))
        later = [lv for lv in manifest_mod.load(level.root).existing() if lv.number > level.number]
        if later:
            out(f"Next: level {later[0].number}, {later[0].title} (crashcourse check {later[0].number}).")
        return
    task = (tests.failing_tasks() or [1])[0]
    hinted = hint_task(level, tests)
    if stuck_words(tests):
        out("Not there yet: your code got stuck, and the first failure above says where. Once it returns, "
            f"crashcourse hint {level.number} finds the first task still failing.")
    elif hinted is None or hinted == task:
        out(f"Not there yet. For a nudge: crashcourse hint {level.number}   (task {task} is the first still "
            "failing)")
    else:
        cause = cause_words(level, tests.first_causes()[0]) if tests.first_causes() else ""
        out(f"Not there yet. For a nudge: crashcourse hint {level.number}   (task {task} fails first, but the "
            f"cause is task {hinted}'s: {cause})")
    if col is not None and tests.passed and col.failed:
        out(f"Note: the tests pass, but {col.meaning.disagrees}; the level counts as failing until both agree.")


def _first_failure_text(outcome: CheckOutcome, tests: TestRun) -> str:
    col = outcome.column
    first_test = tests.first_failure()
    rerun = ""
    if first_test is not None:
        rerun = f'pytest "{rel(outcome.level.root / first_test.nodeid)}"'
        if outcome.folder.resolve() != outcome.level.starter_dir.resolve():
            rerun += f" --submission {rel(outcome.folder)}"
    if col is not None and col.stuck is not None:
        # Stuck code is the one thing to fix first; the tests (in their own process) met it too.
        told = next((r.message for r in tests.results if not r.passed and col.stuck.place
                     and col.stuck.place in r.message), "")
        return told.strip() or col.stuck.story + (f"\n  Re-run just this test: {rerun}" if rerun else "")
    if col is not None:
        # The level's column tells the failure behind the first failing test, chosen by the check ids
        # and causes that test recorded, so the re-run command fits the story.
        told = col.explain(first_test.checks if first_test else [], first_test.causes if first_test else [],
                           first_test.message if first_test else None, rerun)
        if told:
            return told
    if first_test is not None:
        # (A message that ends with its own re-run command, as a stuck test's does, keeps just that one.)
        again = rerun and "Re-run just this" not in first_test.message
        return first_test.message.strip() + (f"\n  Re-run just this test: {rerun}" if again else "")
    return ""


def _remember_status(level: manifest_mod.Level, folder: Path, outcome: CheckOutcome) -> None:
    status = read_state("status.json")
    status[str(level.number)] = {"folder": str(folder.resolve()), "passed": outcome.ok,
                                 "failing_tasks": outcome.tests.failing_tasks(),
                                 "hint_task": hint_task(level, outcome.tests),
                                 "causes": outcome.tests.first_causes(),
                                 "stuck": stuck_words(outcome.tests),
                                 "files": files_signature(level.watched_files(folder))}
    write_state("status.json", status)


def cmd_check(args: argparse.Namespace) -> int:
    level = level_or_say(args.level)
    if level is None:
        return 2
    folder = folder_for(level, args.path)
    if not folder.is_dir():
        say(f"--path {args.path}: there is no such folder.")
        return 2
    outcome = check_level(level, folder, examples=args.examples, seed=args.seed, paint=matrix.Painter(), here=True)
    return 0 if outcome.ok else 1


def register(sub: Any) -> None:
    """The ``check`` command's parser (``sub`` is the cli's subparsers, descriptions wrapped)."""
    fmt = argparse.RawDescriptionHelpFormatter
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
