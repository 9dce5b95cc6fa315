"""What a level module offers the rest of the kit, and how the manifest finds it.

``exercises/manifest.json`` names each level's module (``"module": "grader.levels.loop"``). That
module defines ``LEVEL``, an instance of a :class:`LevelModule` subclass. Every command reaches the
level only through it:

- ``namespace``: where its checks live in :mod:`grader.levels.registry`;
- :meth:`LevelModule.column`: its crash-matrix column for a folder of files (``demo``, ``check``,
  ``selfcheck``);
- :meth:`LevelModule.render_options` and :meth:`LevelModule.engine_words`: how the matrix is headed
  and the sentence above it;
- :attr:`LevelModule.runs_a_loop`, ``several_calls`` and ``own_loader``: how ``crashcourse run``
  drives its file and shows what it left;
- :meth:`LevelModule.warm`: work ``crashcourse grade`` does once before its judges fork.

Several levels may share one module (levels 2 and 3 both use :mod:`grader.levels.loop`); what
differs between them (crash models, file names, the function) comes from the manifest entry.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Optional

__all__ = ["LevelModule", "load_level_module", "LevelModuleError"]


class LevelModuleError(Exception):
    """The manifest names a module that cannot be imported or defines no ``LEVEL``."""


class LevelModule:
    """The interface a level module implements (subclass it; override what the level needs)."""

    namespace: str = "loop"          # its checks' namespace in grader.levels.registry
    runs_a_loop: bool = True         # its file has run_agent: `crashcourse run` can drive it
    several_calls: bool = False      # its task names several tool calls in one turn (`crashcourse run` drives that task)
    own_loader: bool = False         # its state spans files that the learner's load_checkpoint reads back

    def column(self, title: str, folder: Path, level: Any, seed: int = 0) -> Optional[Any]:
        """The crash-matrix column (:class:`grader.faces.columns.Column`) of the files in ``folder``,
        or None when the level has no matrix (its tests are the whole verdict)."""
        return None

    def render_options(self, level: Any) -> dict:
        """Keyword arguments for :func:`grader.faces.matrix.render` (a heading, row grouping)."""
        return {}

    def engine_words(self, level: Any) -> str:
        """One sentence above the matrix: what each row did to the learner's code."""
        if level.crash_models:
            from grader.levels import columns

            return f"Crash models: {columns.models_line(level)}."
        return ""

    def warm(self, level: Any, scenarios: list) -> None:
        """Before ``crashcourse grade`` forks its judges: anything every judge would otherwise redo."""

    # -- helpers for subclasses ----------------------------------------------------------------------

    @staticmethod
    def import_file(title: str, folder: Path, level: Any) -> tuple[Any, Optional[Any]]:
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

    def import_function(self, title: str, folder: Path, level: Any) -> tuple[Any, Optional[Any]]:
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
