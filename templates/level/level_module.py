"""Level NUMBER: TITLE (the level module the manifest names; copy to grader/levels/NAME.py).

A level module defines ``LEVEL``, an instance of a :class:`grader.levels.interface.LevelModule`
subclass. This template's level is a loop level: the learner's ``run_agent`` is crashed at every
point of one run, and the engine's invariants (the ``loop`` checks) judge each crash state. Levels
that need checks of their own declare a namespace with ``grader.levels.registry.declare`` here, at
import time, and draw their own column (see grader/levels/resume.py for one).
"""

from __future__ import annotations

from typing import Any

from grader.levels.loop import LoopLevel


class TemplateLevel(LoopLevel):
    """Crashed like level 2; only the sentence above the matrix is this level's own."""

    def engine_words(self, level: Any) -> str:
        return ("Each row: your loop killed at that point (crash models "
                + ", ".join(level.crash_models) + "), and what a resume would find.")


LEVEL = TemplateLevel()
