"""``crashcourse demo [N]``: for each level, the crash matrix of the broken starter beside the solution,
on the scripted model."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path
from typing import Any

from grader.engine.scripted import DEFAULT_SEED
from grader.faces import matrix
from grader.faces.student.common import engine_words, kit_manifest, level_column, level_heading, render, say
from grader.levels import manifest as manifest_mod


DEMO_INTRO = """\
crashcourse demo: where a crash lands in an agent loop, and what a resume would find there.

Each level's code runs on a scripted model (no network, no key) while every file operation is
recorded; the grader then rebuilds the files as a crash at each point would leave them. Rows are the
places a crash can land (or, for a level of named checks, its checks), in the level's own words;
cells say what a resume would find. Left: the broken starter you get.{right}
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
        kit = kit_manifest()
    except manifest_mod.ManifestError as exc:
        say(str(exc))
        return 1
    hidden = kit.workspace or not any(level.solution_dir.is_dir() for level in kit.existing())
    say(DEMO_INTRO.format(right="" if hidden else " Right: the solution."))
    if hidden:
        say(SOLUTION_IS_THE_INSTRUCTORS)
    shown = 0
    for level in kit.levels:
        if args.level is not None and level.number != args.level:
            continue
        say(level_heading(level, paint))
        if not level.exists():
            say(f"  not in this copy of the kit yet ({level.folder}/ is not there); skipped.\n")
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
            say(f"  no crash matrix for this kind of level ({level.module}) in the demo yet; {where} shows its "
                 "verdicts.\n")
            continue
        words = engine_words(level)
        if words:
            say(textwrap.fill(words, matrix.terminal_width(), initial_indent="  ", subsequent_indent="  "))
        say(render(columns, level, paint))
        say()
        shown += 1
    # The level just shown (demo N), else the first one.
    first = next((level for level in kit.existing() if level.number == args.level), None) \
        or next(iter(kit.existing()), None)
    if first is not None:
        n = first.number
        say(f"Your turn: read {first.folder}/{first.readme}, open {first.folder}/{first.files[0]}, then run\n"
             f"  pytest {first.folder}      the grader (red until every check of the level passes)\n"
             f"  crashcourse check {n}          the same tests plus your crash matrix, first failure in full\n"
             f"  crashcourse hint {n}           a nudge: a question first, then where to look, then the API\n"
             f"  crashcourse watch {n}          check again every time you save")
    return 0


def register(sub: Any) -> None:
    """The ``demo`` command's parser (``sub`` is the cli's subparsers, descriptions wrapped)."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("demo", help="the crash matrix of each level's starter beside its solution",
                       description="Show, for each level, where a crash lands in the broken starter and in the "
                                   "solution, and what a resume would find there. Scripted model: no network, no key.",
                       formatter_class=fmt)
    p.add_argument("level", nargs="?", type=int, help="show only this level")
    p.set_defaults(handler=cmd_demo)
