"""Levels 2 and 3: the learner's agent loop, crashed at every point of one recorded run.

Both levels grade ``run_agent`` with the engine's invariants (the ``loop`` checks of
:mod:`grader.levels.registry`); they differ only in the crash models the manifest lists for them
(level 3 adds the power cuts, M3 to M5).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from pathlib import Path
from typing import Optional

from grader.levels import api
from grader.levels.api import explore_loop, LevelModule, loop_timeout, NESTED_FOLDER, parent_exists, support_tickets

__all__ = ["LEVEL", "LoopLevel"]


class LoopLevel(LevelModule):
    namespace = "loop"

    def column(self, title: str, folder: Path, level: api.Level, seed: int = 0) -> Optional[api.Column]:
        """The crash matrix column of the loop in ``folder`` on the course's scripted task."""
        fn, failed = self.import_function(title, folder, level)
        if failed is not None:
            return failed
        scenario = support_tickets(seed)
        # The same folder as the level's tests, so the matrix counts the same crash states they do
        # (level 3's tests make its parent first: see parent_exists).
        models = tuple(level.crash_models) or ("M1", "M2")
        exploration = explore_loop(fn, scenario, models=models, max_violations=10 ** 6, directory=NESTED_FOLDER,
                                   before=parent_exists if set(models) & {"M3", "M4", "M5"} else None,
                                   timeout=loop_timeout())
        return api.column(title, exploration, scenario.task)

    def warm(self, level: api.Level, scenarios: list) -> None:
        """Check the kit's own solution on the level's conversations, before the judges fork.

        Verdicts are shared by runs of the same conversation (:func:`grader.engine.explore.shared_verdicts`),
        so every student whose saves write the same bytes as the solution's is checked by lookup.
        """
        if level.function != "run_agent" or len(level.files) != 1:
            return
        source = level.solution_dir / level.files[0]
        if not source.is_file():
            return
        spec = importlib.util.spec_from_file_location(f"crashcourse_solution_level{level.number}", source)
        module = importlib.util.module_from_spec(spec)
        with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
            spec.loader.exec_module(module)
            for scenario in scenarios:
                explore_loop(module.run_agent, scenario, models=("M1",))


LEVEL = LoopLevel()
