"""The student commands, one module each: demo, check, hint, watch, selfcheck and run.

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

What they share (the kit, the state kept in ``.crashcourse/``, how paths are shown) is in
:mod:`grader.faces.student.common`; running a level's tests and reading them back is
:mod:`grader.faces.student.testrun`, which is also the pytest plugin that reports each test.
"""

from __future__ import annotations

import argparse
from typing import Any

from grader.faces.student import check, demo, hint, run, selfcheck, watch
from grader.faces.student.common import wrapped

COMMANDS = (demo, check, hint, watch, selfcheck, run)


def register(sub: Any) -> None:
    """Add every student command to the cli's subparsers, in the order ``crashcourse --help`` lists them."""
    sub = argparse.Namespace(add_parser=wrapped(sub.add_parser))
    for command in COMMANDS:
        command.register(sub)
