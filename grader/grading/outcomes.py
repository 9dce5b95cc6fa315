"""One outcome collector: what each test of a level ended as, its task, and what it is worth.

Every run of a level's tests reads its results through :class:`Outcomes`, a small pytest plugin:
``pytest exercises/levelN`` (the points line of the summary), ``crashcourse check`` (the student's
run, streamed to a file) and the judge of ``crashcourse grade``. So a test's status and points are
decided by one set of rules:

* **points** (:func:`points_of`): ``@pytest.mark.points(P)`` is worth ``P``; a bare
  ``@pytest.mark.points`` is worth 1 (the plugin's docstring: the marker says a test carries
  points, and one is the unit); a test with no marker carries none (``None``: it counts in no
  total).
* **task** (:func:`task_of`): ``@pytest.mark.task(taskno=N)`` or ``task(N)``; else ``None``.
* **status**: a failure while setting the test up is an ``error``; the test's own body decides
  ``passed`` or ``failed``; a skip is ``skipped``; a teardown that fails after a pass turns it
  into an ``error``. A test that was collected and never reported stays an ``error``.

No pytest import at module level: the grading worker imports this only when it runs tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

__all__ = ["Outcome", "Outcomes", "points_of", "task_of"]

NOT_RUN = "the test did not run"


def points_of(item: Any) -> Optional[float]:
    """What a test is worth: its ``points`` marker's value, 1 for a bare marker, None without one."""
    marker = item.get_closest_marker("points")
    if marker is None:
        return None
    return float(marker.args[0]) if marker.args else 1.0


def task_of(item: Any) -> Optional[int]:
    """The README task a test checks (``task(taskno=N)`` or ``task(N)``), or None."""
    marker = item.get_closest_marker("task")
    if marker is None:
        return None
    return marker.kwargs.get("taskno", marker.args[0] if marker.args else None)


@dataclass
class Outcome:
    nodeid: str
    name: str
    task: Optional[int]
    points: Optional[float]
    status: str = "error"      # passed, failed, error or skipped
    output: str = NOT_RUN      # the failure's text (pytest.fail(..., pytrace=False) leaves just the message)
    reported: bool = False     # pytest reported at least one phase of it (deselected tests never are)
    checks: list = field(default_factory=list)   # ids it tripped, as it recorded them (grader.levels.registry)
    causes: list = field(default_factory=list)   # why, most telling first (grader.engine.invariants.CAUSES)


class Outcomes:
    """A pytest plugin object: register one, run the session, read :attr:`tests` (by node id)."""

    def __init__(self) -> None:
        self.tests: dict[str, Outcome] = {}
        self.collect_errors: list[str] = []

    # -- pytest hooks
    def pytest_collection_modifyitems(self, items: list) -> None:
        for item in items:
            self.tests[item.nodeid] = Outcome(item.nodeid, item.name, task_of(item), points_of(item))

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.collect_errors.append(str(report.longreprtext)[-3000:])

    def pytest_runtest_logreport(self, report: Any) -> None:
        entry = self.tests.get(report.nodeid)
        if entry is None:
            return
        text = str(report.longreprtext or "")
        entry.reported = True
        if report.failed:
            entry.checks = list(dict(report.user_properties).get("crashcourse_checks") or entry.checks)
            entry.causes = list(dict(report.user_properties).get("crashcourse_causes") or entry.causes)
        if report.when == "setup":
            if report.failed:
                entry.status, entry.output = "error", text
            elif report.skipped:
                entry.status, entry.output = "skipped", text
        elif report.when == "call":
            entry.status = "passed" if report.passed else "skipped" if report.skipped else "failed"
            entry.output = text if not report.passed else ""
        elif report.when == "teardown":
            if report.failed and entry.status == "passed":
                entry.status, entry.output = "error", text
            self.finished(entry)

    # -- for subclasses and readers
    def finished(self, entry: Outcome) -> None:
        """Called once a test's outcome is final (after its teardown)."""

    def scored(self) -> list:
        """The tests that count towards points: those with points that were not skipped."""
        return [t for t in self.tests.values() if t.points is not None and t.status != "skipped" and t.reported]

    def points(self) -> tuple:
        """(points earned, points possible) over :meth:`scored`."""
        scored = self.scored()
        return sum(t.points for t in scored if t.status == "passed"), sum(t.points for t in scored)
