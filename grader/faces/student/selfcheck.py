"""``crashcourse selfcheck`` (for the kit's maintainers): every starter breaks what it is planted to
break, every solution passes, every README task has its three hints, and the manifest is in order."""

from __future__ import annotations

import argparse
import concurrent.futures
import re
import textwrap
from typing import Any

from grader.faces import matrix
from grader.faces.student import testrun
from grader.faces.student.common import cause_words, kit_manifest, level_column, say
from grader.levels import manifest as manifest_mod


LINE_NUMBER = re.compile(r"\blines?\s+\d+", re.IGNORECASE)


def level_problems(level: manifest_mod.Level) -> list[str]:
    """Static problems of one level folder: files, README tasks, hints, test markers."""
    where = f"level {level.number}"
    out = _file_problems(level, where)
    tasks, found = _readme_problems(level, where)
    out += found + _hints_problems(level, where, tasks)
    marked = manifest_mod.test_task_numbers(level.test_paths())
    unknown = sorted(marked - {n for n, _ in tasks})
    if tasks and unknown:
        out.append(f"{where}: tests are marked with task numbers {unknown} that the README does not have")
    return out


def _file_problems(level: manifest_mod.Level, where: str) -> list[str]:
    out = [f"{where}: the solution folder {level.solution}/ has no {name}" for name in level.files
           if not (level.solution_dir / name).is_file()]
    absent = [p.name for p in (level.starter_dir / t for t in level.tests) if not p.is_file()]
    if absent:
        found = sorted(p.name for p in level.starter_dir.glob("test_*.py"))
        out.append(f"{where}: the manifest lists {', '.join(absent)} but {level.folder}/ holds "
                   f"{', '.join(found) or 'no test files'}")
    return out


def _readme_problems(level: manifest_mod.Level, where: str) -> tuple[list, list[str]]:
    """The README's ``(number, title)`` tasks, and what is wrong with them."""
    readme = level.starter_dir / level.readme
    tasks = manifest_mod.readme_tasks(readme)
    if not readme.is_file():
        return tasks, [f"{where}: {level.folder}/{level.readme} is missing"]
    if not tasks:
        return tasks, [f"{where}: {level.folder}/{level.readme} has no '## N. Title' task headings"]
    if [n for n, _ in tasks] != list(range(1, len(tasks) + 1)):
        return tasks, [f"{where}: README tasks are numbered {[n for n, _ in tasks]}, not 1, 2, 3, ..."]
    return tasks, []


def _hints_problems(level: manifest_mod.Level, where: str, tasks: list) -> list[str]:
    hints_path = level.starter_dir / level.hints
    if not hints_path.is_file():
        return [f"{where}: {level.folder}/{level.hints} is missing"]
    hints = {t.number: t for t in manifest_mod.parse_hints(hints_path)}
    out = []
    for number, title in tasks:
        hint = hints.get(number)
        if hint is None:
            out.append(f"{where}: task {number} ({title}) has no hints")
        else:
            out += _task_hints_problems(level, where, number, title, hint)
    extra = sorted(set(hints) - {n for n, _ in tasks})
    if extra and tasks:
        out.append(f"{where}: hints.md has tasks {extra} that the README does not")
    return out


def _task_hints_problems(level: manifest_mod.Level, where: str, number: int, title: str,
                         hint: manifest_mod.TaskHints) -> list[str]:
    """One task's hints: titled as in the README, three bullets a question first, causes a level records."""
    out = []
    if hint.title.strip().lower() != title.strip().lower():
        out.append(f"{where}: hints for task {number} are titled {hint.title!r}, the README says {title!r}")
    if len(hint.steps) != 3:
        out.append(f"{where}: task {number} has {len(hint.steps)} hint bullets; it needs exactly 3 "
                   "(a question, a pointer, the API)")
    elif not hint.steps[0].rstrip().endswith("?"):
        out.append(f"{where}: the first hint of task {number} should be a question")
    for cause, ladder in hint.by_cause.items():
        if not cause_words(level, cause):
            out.append(f"{where}: task {number} has hints for the cause {cause!r}, which no check records")
        elif len(ladder) != 3 or not ladder[0].rstrip().endswith("?"):
            out.append(f"{where}: the hints of task {number} for {cause!r} need exactly 3 bullets, the "
                       "first a question")
    for step in hint.steps + [s for ladder in hint.by_cause.values() for s in ladder]:
        if LINE_NUMBER.search(step):
            out.append(f"{where}: a hint of task {number} cites a line number ({step[:50]!r}...); "
                       "line numbers change as the learner edits")
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
        kit = kit_manifest()
    except manifest_mod.ManifestError as exc:
        say(str(exc))
        return 1
    if kit.workspace:
        say(f"selfcheck checks the kit itself, solutions included; {kit.root} is a learner's workspace, which has "
             "none. Run it outside this folder (it then checks the installed kit).")
        return 2
    if args.level is not None and all(level.number != args.level for level in kit.levels):
        say(f"There is no level {args.level} in {kit.root / 'exercises' / 'manifest.json'}; its levels are "
            + ", ".join(str(level.number) for level in kit.levels) + ".")
        return 2
    paint = matrix.Painter()
    problems = [f"manifest: {p}" for p in manifest_mod.problems(kit)]
    notes: list = []
    jobs: list = []
    for level in kit.levels:
        if args.level is None or level.number == args.level:  # --level N: that level alone (the manifest whole)
            jobs += _check_level(level, args, problems, notes)
    if jobs:
        say(f"Running the tests of {len(jobs) // 2} level(s) on their starters and solutions...")
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            runs = list(pool.map(lambda job: testrun.run_tests(job[0], job[2], examples=args.examples), jobs))
        for (level, which, _), run in zip(jobs, runs):
            _judge_run(level, which, run, problems, notes)
    for note in notes:
        say(textwrap.fill(note, matrix.terminal_width(), initial_indent="  ", subsequent_indent="    "))
    if problems:
        say()
        say(paint(f"selfcheck found {len(problems)} problem(s):", "31"))
        for p in problems:
            say(textwrap.fill(p, matrix.terminal_width(), initial_indent="  - ", subsequent_indent="    "))
        return 1
    say(paint("selfcheck: every level present is in order.", "32"))
    return 0


def _check_level(level: manifest_mod.Level, args: argparse.Namespace, problems: list, notes: list) -> list:
    """One level's static and matrix checks, into ``problems`` and ``notes``; its test runs still to make."""
    if not level.exists():
        line = f"level {level.number}: {level.folder}/ is not there yet"
        (problems if args.strict else notes).append(line)
        return []
    problems.extend(level_problems(level))
    try:
        found, summary = engine_problems(level)
    except Exception as exc:  # noqa: BLE001 - report, keep checking the other levels
        found, summary = [f"level {level.number}: the matrix engine raised {type(exc).__name__}: {exc}"], "error"
    problems.extend(found)
    notes.append(f"level {level.number}: {summary}")
    if level.test_paths() and not args.no_tests:
        return [(level, "starter", level.starter_dir), (level, "solution", level.solution_dir)]
    return []


def _judge_run(level: manifest_mod.Level, which: str, run: testrun.TestRun, problems: list, notes: list) -> None:
    """The starter's tests must fail and the solution's pass: a problem if not, else a note."""
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


def register(sub: Any) -> None:
    """The ``selfcheck`` command's parser (``sub`` is the cli's subparsers, descriptions wrapped)."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("selfcheck", help="(maintainers) every starter fails as planted, every solution passes",
                       description="Checks the kit itself: the manifest is ordered with unique names; each level "
                                   "present has its files, README tasks and three hints per task; each starter breaks "
                                   "exactly what it is planted to break; each solution passes its tests.",
                       formatter_class=fmt)
    p.add_argument("--level", type=int, metavar="N", help="check level N alone (the manifest is checked whole)")
    p.add_argument("--strict", action="store_true", help="count levels that are not there yet as problems")
    p.add_argument("--no-tests", action="store_true", help="skip running the level tests (faster)")
    p.add_argument("--examples", type=int, metavar="N", help="generated conversations per property test")
    p.set_defaults(handler=cmd_selfcheck)

