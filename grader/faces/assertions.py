"""Helpers the level tests share: run a submission's loop, and fail with a lesson, not a traceback."""

from __future__ import annotations

from typing import Iterable

import pytest

from grader.engine.explore import LOOP_TIMEOUT, Exploration, at_point

# How long one run of the learner's code may take (CRASHCOURSE_LOOP_TIMEOUT changes it).
STUDENT_TIMEOUT = LOOP_TIMEOUT


def assert_holds(exploration: Exploration, invariants: Iterable[str], rerun: str = "",
                 also_about: str = "") -> None:
    """Fail the test, in the learner's words, if any of ``invariants`` broke in ``exploration``.

    A loop that crashed on its own, or wrote where the recorder cannot see, fails every test: no
    verdict about crashes means anything until the uncrashed run works.
    """
    wanted = set(invariants)
    if exploration.error or exploration.unseen:
        pytest.fail(exploration.report(), pytrace=False)
    hits = [v for v in exploration.violations if v.invariant in wanted]
    if not hits:
        return
    first = hits[0]
    if rerun:
        first.rerun = rerun
    broken = len(hits) + sum(n for name, n in exploration.over_cap.items() if name in wanted)
    others = broken - 1
    text = [f"{exploration.scenario}: {broken} of {exploration.states} crash states break "
            f"{', '.join(sorted({v.invariant for v in hits}))}.", "", first.explain()]
    if others:
        kinds: dict = {}
        for v in hits[1:]:
            kinds.setdefault((v.invariant, v.where), v)
        text.append("")
        text.append(f"The same happens at {others} more crash state{'s' if others > 1 else ''}, for example:")
        for v in list(kinds.values())[:3]:
            text.append(f"  {v.invariant} {at_point(v.where)}, {v.operation}")
    if also_about:
        text += ["", also_about]
    pytest.fail("\n".join(text), pytrace=False)


def require(holds: object, message: str) -> None:
    """Fail with ``message`` alone (no pytest locals, no traceback into the kit) unless ``holds``."""
    if not holds:
        pytest.fail(message, pytrace=False)
