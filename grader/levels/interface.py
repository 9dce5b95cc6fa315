"""What a level module offers the rest of the kit, and how the manifest finds it.

``exercises/manifest.json`` names each level's module (``"module": "grader.levels.loop"``). That
module defines ``LEVEL``, an instance of a :class:`LevelModule` subclass. Every command reaches the
level only through it:

- ``namespace``: where its checks live in :mod:`grader.levels.registry`;
- :meth:`LevelModule.column`: its crash-matrix column for a folder of files (``demo``, ``check``,
  ``selfcheck``);
- :meth:`LevelModule.render_options` and :meth:`LevelModule.engine_words`: how the matrix is headed
  and the sentence above it;
- :meth:`LevelModule.drive`: how ``crashcourse run`` drives its file (a :class:`Drive`), or None
  when it cannot;
- :meth:`LevelModule.warm`: work ``crashcourse grade`` does once before its judges fork.

Several levels may share one module (levels 2 and 3 both use :mod:`grader.levels.loop`); what
differs between them (crash models, file names, the function) comes from the manifest entry.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:  # the manifest imports this module to find a level's LEVEL
    from grader.levels.columns import Column
    from grader.levels.manifest import Level

__all__ = ["Drive", "LevelModule", "load_level_module", "LevelModuleError"]


@dataclass(frozen=True)
class Drive:
    """How ``crashcourse run`` drives a level's file (the level's :meth:`LevelModule.drive` says).

    ``function`` is what it calls in the learner's file. A run starts the course's task in an empty
    folder: ``function(task, tools, call_model, execute_tool, directory)``; with ``resumes`` it
    carries on the checkpoint an earlier run left there instead: ``function(tools, call_model,
    execute_tool, directory)``. ``several_calls``: the model may name several tool calls in one turn
    (and the live API is asked for that). ``own_loader``: the state spans files of the learner's
    choosing, read back through the learner's own ``load_checkpoint``."""

    function: str
    resumes: bool = False
    several_calls: bool = False
    own_loader: bool = False


class LevelModuleError(Exception):
    """The manifest names a module that cannot be imported or defines no ``LEVEL``."""


class LevelModule:
    """The interface a level module implements (subclass it; override what the level needs)."""

    namespace: str = "loop"          # its checks' namespace in grader.levels.registry
    several_calls: bool = False      # its task names several tool calls in one turn (see Drive)
    own_loader: bool = False         # its state spans files that the learner's load_checkpoint reads back (see Drive)

    def column(self, title: str, folder: Path, level: Level, seed: int = 0) -> Optional[Column]:
        """The crash-matrix column (:class:`grader.levels.columns.Column`) of the files in ``folder``,
        or None when the level has no matrix (its tests are the whole verdict)."""
        return None

    def render_options(self, level: Level) -> dict:
        """Keyword arguments for :func:`grader.faces.matrix.render` (a heading, row grouping)."""
        return {}

    def engine_words(self, level: Level) -> str:
        """One sentence above the matrix: what each row did to the learner's code."""
        if level.crash_models:
            from grader.levels import columns

            return f"Crash models: {columns.models_line(level)}."
        return ""

    def drive(self, level: Level) -> Optional[Drive]:
        """How ``crashcourse run`` drives the level's file, or None when it cannot (the file is no
        loop). By default a level whose manifest ``function`` is ``run_agent`` is run as a loop."""
        if level.function != "run_agent":
            return None
        return Drive(level.function, several_calls=self.several_calls, own_loader=self.own_loader)

    def warm(self, level: Level, scenarios: list) -> None:
        """Before ``crashcourse grade`` forks its judges: anything every judge would otherwise redo."""

    # -- helpers for subclasses ----------------------------------------------------------------------

    @staticmethod
    def import_file(title: str, folder: Path, level: Level) -> tuple[Any, Optional[Column]]:
        """``(module, None)`` for the level's first file in ``folder``, or ``(None, failed column)``
        saying, in the learner's words, why it could not be imported."""
        from grader.levels import columns

        filename = level.files[0]
        path = Path(folder) / filename
        if not path.is_file():
            return None, columns.failed_column(title, f"there is no {filename} in {folder}")
        from grader.engine import loader

        try:
            return columns.load_module(path), None
        except loader.ImportProblem as exc:
            return None, columns.failed_column(title, str(exc))

    def import_function(self, title: str, folder: Path, level: Level) -> tuple[Any, Optional[Column]]:
        """``(the level's function, None)`` from its first file in ``folder`` (``level.function``:
        ``run_agent``, ...), or ``(None, failed column)`` saying why there is none."""
        from grader.levels import columns

        module, failed = self.import_file(title, folder, level)
        if failed is not None:
            return None, failed
        fn = getattr(module, level.function, None)
        if not callable(fn):
            return None, columns.failed_column(title, f"{level.files[0]} has no function `{level.function}`")
        return fn, None


def load_level_module(name: str) -> LevelModule:
    """The ``LEVEL`` object of the module ``name`` (a dotted import path)."""
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        raise LevelModuleError(f"the level module {name!r} cannot be imported: {exc}") from None
    level = getattr(module, "LEVEL", None)
    if not isinstance(level, LevelModule):
        raise LevelModuleError(f"the level module {name!r} defines no LEVEL (an instance of "
                               "grader.levels.interface.LevelModule)")
    return level
