"""Level NUMBER: TITLE (the level module the manifest names; copy to grader/levels/NAME.py).

A level module defines ``LEVEL``, an instance of a :class:`grader.levels.api.LevelModule` subclass,
and imports from the kit only :mod:`grader.levels.api`. This template's level is a loop level: the
learner's ``run_agent`` is crashed at every point of one run, and the engine's invariants (the
``loop`` checks) judge each crash state. For a level with checks of its own, start from
``templates/named-checks`` instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from grader.levels.api import Column, Drive, Level, LevelModule, column, explore_loop, loop_timeout, support_tickets


class TemplateLevel(LevelModule):
    """Crashed like level 2: one run of the course's task, every crash point, the loop invariants."""

    namespace = "loop"

    def column(self, title: str, folder: Path, level: Level, seed: int = 0) -> Optional[Column]:
        run_agent, failed = self.import_function(title, folder, level)
        if failed is not None:
            return failed
        scenario = support_tickets(seed)
        # The crash models of the level's tests (the manifest's), so the matrix counts what they count.
        exploration = explore_loop(run_agent, scenario, models=tuple(level.crash_models) or ("M1",),
                                   max_violations=10 ** 6, timeout=loop_timeout())
        return column(title, exploration, scenario.task)

    def engine_words(self, level: Level) -> str:
        return ("Each row: your loop killed at that point (crash models "
                + ", ".join(level.crash_models) + "), and what a resume would find.")

    def drive(self, level: Level) -> Optional[Drive]:
        return Drive("run_agent")  # `crashcourse run` runs the learner's loop once on the course's task


LEVEL = TemplateLevel()
