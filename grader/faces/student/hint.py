"""``crashcourse hint N [--reset] [--task K]``: the next hint for the first task that still fails:
a question, then where to look, then the API."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path
from typing import Any, Optional

from grader.engine import loader
from grader.faces import matrix
from grader.faces.student import testrun
from grader.faces.student.common import (cause_words, files_signature, folder_for, level_or_say, load_declarations,
                                         read_state, rel, say, write_state)
from grader.faces.student.testrun import hint_task, stuck_words
from grader.levels import manifest as manifest_mod
from grader.levels import registry

STEP_NAMES = ("A question", "Where to look", "What to reach for")


def _failing_task(level: manifest_mod.Level, folder: Path, tasks: list) -> tuple[Optional[int], list, str]:
    """The task to hint at (see :func:`hint_task`), the causes the first failure recorded, and where
    the code got stuck if it did (:func:`stuck_words`): from the last check if the files have not
    changed, else a fresh run."""
    status = read_state("status.json").get(str(level.number))
    if status and status.get("files") == files_signature(level.watched_files(folder)) \
            and status.get("folder") == str(folder.resolve()):
        failing = status.get("failing_tasks") or []
        return (status.get("hint_task") or (failing[0] if failing else None), list(status.get("causes") or []),
                str(status.get("stuck") or ""))
    if not level.test_paths():
        return (tasks[0].number if tasks else None), [], ""
    print("(running the tests to see which task is still failing...)", file=sys.stderr)
    run = testrun.run_tests(level, folder, examples=3)
    if run.problem:
        return (tasks[0].number if tasks else None), [], ""
    return hint_task(level, run), run.first_causes(), stuck_words(run)


def hint_ladder(tasks: list, number: int, causes: list) -> tuple[manifest_mod.TaskHints, str, list]:
    """The task to hint at, the cause its hints are chosen for ('' if none), and the steps: the
    cause's own ladder when hints.md has one, else the task's."""
    task = next((t for t in tasks if t.number == number), tasks[0])
    cause = next((c for c in causes if c in task.causes and registry.cause_words(c)), "")
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
    level = level_or_say(args.level)
    if level is None:
        return 2
    hints_path = level.starter_dir / level.hints
    tasks = manifest_mod.parse_hints(hints_path)
    state = read_state("hints.json")
    key = str(level.number)
    if args.reset:
        state.pop(key, None)
        write_state("hints.json", state)
        say(f"Hints for level {level.number} start again from the first question.")
        return 0
    if not tasks:
        say(f"Level {level.number} has no hints yet ({rel(hints_path)} is missing or empty).")
        return 1
    causes: list = []
    width = matrix.terminal_width()
    if args.task is not None:
        number = args.task
        if all(t.number != number for t in tasks):
            listed = "; ".join(f"{t.number}. {t.title}" for t in tasks)
            say(textwrap.fill(f"Level {level.number} has no task {number}. Its tasks: {listed}. For example: "
                               f"crashcourse hint {level.number} --task {tasks[0].number}", width), sys.stderr)
            return 2
    else:
        folder = folder_for(level, args.path)
        problem = _syntax_problem(level, folder)
        if problem:
            say(problem)
            say()
            say(textwrap.fill("No task's hints fit yet: until Python can read the file, every test fails for "
                               f"this one reason. Once it is fixed, `crashcourse hint {level.number}` finds the "
                               "first task that still fails.", width))
            return 1
        number, causes, stuck = _failing_task(level, folder, tasks)
        if stuck:
            say(stuck)
            say()
            say(textwrap.fill("No task's hints fit yet: the tests that call that code stop until it returns. Look "
                               "at that line for a loop whose condition never changes, or a call that waits forever; "
                               f"once it returns, `crashcourse hint {level.number}` finds the first task that still "
                               "fails.", width))
            return 1
        if number is None:
            say(textwrap.fill(f"Every test of level {level.number} passes, so there is nothing to hint at. "
                               f"(To read a task's hints anyway: crashcourse hint {level.number} --task 1.)",
                               matrix.terminal_width()))
            return 0
    load_declarations(level)  # the level's own causes, which its hints may be about
    task, cause, steps = hint_ladder(tasks, number, causes)
    # A cause with a ladder of its own keeps its own count: its steps are not the task's.
    counter = f"{task.number}:{cause}" if cause in task.by_cause else str(task.number)
    shown = state.setdefault(key, {})
    count = min(int(shown.get(counter, 0)) + 1, len(steps))
    shown[counter] = count
    write_state("hints.json", state)
    paint = matrix.Painter()
    say(paint.bold(f"Level {level.number}, task {task.number}: {task.title}") +
         f"   (hint {count} of {len(steps)})")
    if cause:  # say why these hints: the failure's cause, which may sit in another task than the test
        say(textwrap.fill(f"Why this task: in the last check, {cause_words(level, cause)}.", width))
    say()
    for i, step in enumerate(steps[:count]):
        name = STEP_NAMES[i] if i < len(STEP_NAMES) else f"Hint {i + 1}"
        body = textwrap.fill(step, width, initial_indent="  ", subsequent_indent="  ")
        say(("  " + name + ":") if i < count - 1 else paint.bold("  " + name + ":"))
        say(body if i == count - 1 else paint(body, "2"))
        say()
    if count < len(steps):
        again = f"crashcourse hint {level.number}" + (f" --task {task.number}" if args.task is not None else "")
        say(f"Still stuck? Run `{again}` again for the next step.")
    else:
        say(textwrap.fill(f"That was the last hint for task {task.number}. `crashcourse check {level.number}` "
                           f"explains the failure in full; `crashcourse hint {level.number} --reset` starts the "
                           "hints over.", width))
    return 0


def register(sub: Any) -> None:
    """The ``hint`` command's parser (``sub`` is the cli's subparsers, descriptions wrapped)."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("hint", help="the next hint for the first task still failing",
                       description="Hints come in three steps per task: a question, then where to look, then the API "
                                   "to reach for. Each call shows one more step of the first task that still fails.",
                       formatter_class=fmt)
    p.add_argument("level", type=int, help="the level number")
    p.add_argument("--task", type=int, metavar="K", help="hints for task K instead of the first failing one")
    p.add_argument("--reset", action="store_true", help="forget which hints were shown for this level")
    p.add_argument("--path", metavar="DIR", help="the folder holding your files (default: exercises/levelN)")
    p.set_defaults(handler=cmd_hint)
