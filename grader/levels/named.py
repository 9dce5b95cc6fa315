"""A level whose verdict is a list of named checks, each a function of the learner's module.

Subclass :class:`NamedChecksLevel`, give it a ``namespace`` whose checks are declared with
:func:`grader.levels.registry.declare`, and a ``check_functions`` dict from each check id to a
function ``check(module, seed)`` that returns ``None`` when the check holds, else the story of what
went wrong (a string), or that story with the causes it names (``(story, [cause, ...])``). The
matrix then has one row per check, and the level's tests call :meth:`NamedChecksLevel.verdict`, so
``pytest``, ``check``, ``demo`` and ``grade`` judge the same thing. ``templates/named-checks/``
starts a level from this.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from grader.engine.hangs import LoopTimeout, hang_mark, hangs_since, loop_timeout, time_limit
from grader.levels import registry
from grader.levels.columns import OK, STUCK, Column, ColumnMeaning, NamedChecks
from grader.levels.interface import LevelModule

if TYPE_CHECKING:
    from grader.levels.manifest import Level

Story = Union[None, str, tuple]   # what a check function returns: None, a story, or (story, causes)
CheckFunction = Callable[[Any, int], Story]


def _a_function_of(module: Any) -> Any:
    """One of the learner's functions in ``module``: the time limit reads the learner's frames by its file."""
    return next((value for value in vars(module).values() if getattr(value, "__module__", None) == module.__name__
                 and hasattr(value, "__code__")), None) if hasattr(module, "__dict__") else None


class NamedChecksLevel(LevelModule):
    """A level judged by named checks, one matrix row each (see the module's docstring)."""

    check_functions: dict = {}
    meaning: ColumnMeaning = NamedChecks(fine="{title}: all {rows} checks hold",
                                         failing="{title}: {bad} of {rows} checks fail ({names})",
                                         stuck_after="so the checks that call it could not be made")
    heading: str = "check"
    engine_sentence: str = "Each row is one check of your file, ok or what went wrong."

    def verdict(self, check_id: str, module: Any, seed: int = 0) -> tuple[Optional[str], list]:
        """``(story, causes)`` of one check on ``module``; ``(None, [])`` when it holds. The learner's
        code runs under the kit's time limit, so a call that never returns is a story too."""
        function = self.check_functions[check_id]
        try:
            with time_limit(loop_timeout(), owner=_a_function_of(module)):
                found = function(module, seed)
        except LoopTimeout as exc:
            return str(exc), []
        except Exception as exc:  # noqa: BLE001 - a file missing a function fails that check, loudly
            return f"{type(exc).__name__}: {exc}", []
        if isinstance(found, tuple):
            story, causes = found
            return story, list(causes)
        return found, []

    def findings(self, module: Any, seed: int = 0) -> tuple[dict, dict]:
        """``(problems, stuck)``: ``{check id: story}`` for every check that fails, and ``{check id:
        (kind, Hang)}`` for each check that met code that got stuck ("stopped" there, or "refused"
        having got stuck before), so no verdict on it holds."""
        problems: dict = {}
        stuck: dict = {}
        for check in registry.checks(self.namespace):
            mark = hang_mark()
            story, _ = self.verdict(check.id, module, seed)
            met = hangs_since(mark)
            if met:
                stuck[check.id] = met[0]
                kind, hang = met[0]
                story = hang.story if kind == "stopped" else hang.refusal()
            if story:
                problems[check.id] = story
        return problems, stuck

    def column(self, title: str, folder: Path, level: Level, seed: int = 0) -> Optional[Column]:
        module, failed = self.import_file(title, folder, level)
        if failed is not None:
            failed.namespace, failed.meaning = self.namespace, self.meaning
            return failed
        problems, stuck = self.findings(module, seed)
        col = Column(title, problems=problems, namespace=self.namespace, meaning=self.meaning,
                     stuck=next((hang for kind, hang in stuck.values() if kind == "stopped"), None))
        for check in registry.checks(self.namespace):
            key = ("check", 0, check.id)
            col.labels[key] = (check.row or check.words, "")
            col.cells[key] = [STUCK if check.id in stuck else OK if check.id not in problems
                              else check.cell or check.id.lower()]
        return col

    def render_options(self, level: Level) -> dict:
        return {"group": False, "heading": self.heading}

    def engine_words(self, level: Level) -> str:
        return self.engine_sentence
