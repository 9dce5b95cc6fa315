"""The ``crashcourse`` command (also ``python -m grader``).

Each group of subcommands lives in its own module and registers itself here:
:mod:`grader.faces.student` (demo, check, hint, watch, selfcheck, run),
:mod:`grader.faces.workspace` (init, handout) and :mod:`grader.faces.instructor_cli` (grade,
gradescope-package, gradescope-run, prairielearn-run, prairielearn-image).
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional

from grader import __version__

DESCRIPTION = """\
crashcourse: checkpoints for agent loops, proven by crashing them at every point.

Start here:
  crashcourse demo              the crash matrix of each level's broken starter beside its fix
  pytest exercises/level2       grade your level-2 fix (red until it survives every crash)
  crashcourse check 2           the same checks as a crash matrix, first failure explained
  crashcourse hint 2            a nudge, one step at a time
  crashcourse grade DIR --level 2 --format json    (instructors) grade a folder of submissions
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="crashcourse", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"crashcourse {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    from grader.faces import student, workspace

    student.register(sub)
    workspace.register(sub)
    try:
        from grader.faces import explore_cli, instructor_cli
    except ImportError as exc:  # Windows has no resource or fcntl: the learner's commands still work
        _grading_unavailable(sub, exc)
    else:
        explore_cli.register(sub)
        instructor_cli.register(sub)
    return parser


def _grading_unavailable(sub, exc: ImportError) -> None:
    def explain(args) -> int:
        print(f"crashcourse {args.command}: grading a class runs on Linux or macOS only; this Python lacks "
              f"{exc.name or 'a POSIX module'}. The learner's commands (check, hint, watch, run, demo, init) "
              "work here.", file=sys.stderr)
        return 2
    for name in ("grade", "gradescope-package", "gradescope-run", "prairielearn-run", "prairielearn-image", "explore"):
        parser = sub.add_parser(name, help="(instructors; Linux or macOS) see crashcourse grade --help there",
                                add_help=False)
        parser.add_argument("rest", nargs=argparse.REMAINDER)
        parser.set_defaults(handler=explain)


GRADING = ("grade", "gradescope-run", "prairielearn-run")


def main(argv: Optional[list] = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    if words[:1] and words[0] in GRADING:
        # Before the commands' modules are imported: grading writes no compiled file into the kit.
        sys.dont_write_bytecode = True
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
