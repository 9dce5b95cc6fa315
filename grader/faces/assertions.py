"""Helpers the level tests share: run a submission's loop, and fail with a lesson, not a traceback.

A failing test names the checks it tripped as data: :func:`fail` and :func:`checking` attach the
ids (qualified by namespace, :mod:`grader.levels.registry`) to the exception, and the pytest plugin
copies them into the test's ``user_properties`` under :data:`~grader.levels.registry.PROPERTY`, where
every report reads them.
"""

from __future__ import annotations

import contextlib
from typing import Iterable, Iterator

import pytest

from grader.engine.explore import LOOP_TIMEOUT, Exploration, at_point
from grader.levels import registry

# How long one run of the learner's code may take (CRASHCOURSE_LOOP_TIMEOUT changes it).
STUDENT_TIMEOUT = LOOP_TIMEOUT
CHECKS_ATTRIBUTE = "crashcourse_checks"   # set on the exception a failing test raises
CAUSES_ATTRIBUTE = "crashcourse_causes"   # why it tripped them (keys of grader.engine.invariants.CAUSES)

# The question a failure ends with, by the cause of its first broken crash state: the same invariant
# can break for different reasons, and the question must be about the one this code has.
NUDGES = {
    "no-save-a": "Which save point does this loop never reach? Look at what the file says while a tool runs.",
    "no-save-b": "What does the file say once a tool's result is in `messages`, before the model is called "
                 "again? Count the saves in one turn of your loop.",
    "no-final-save": "What is on disk after the model's last answer has been appended? Compare it with what "
                     "run_agent returns.",
    "pending-shape": "Which keys does the protocol keep in pendingToolUse, and which does the tool_use block "
                     "carry besides them?",
    "in-place": "Think about where the new bytes go while they are being written.",
    "buffered-rename": "When does a file opened in a `with` block hand its bytes to the operating system? Where "
                       "does your rename run, inside that block or after it?",
    "deleted-first": "Between removing the old checkpoint and renaming the new one in, what is on disk? Which "
                     "call replaces the old file in one step?",
    "counts-turns": "When does a turn count as done? Compare `turns` with the tool results in `messages` at "
                    "each save.",
    "counts-tokens": "Which responses does your `tokensUsed` add up, the first one included, and which usage "
                     "fields of each?",
    "counts-early": "At save point A, is the model's message already in `messages` when you save?",
}


@contextlib.contextmanager
def checking(checks: Iterable[str], namespace: str = "loop") -> Iterator[None]:
    """Any exception raised inside carries ``checks`` (ids of ``namespace``) as the ones it tripped."""
    try:
        yield
    except BaseException as exc:
        ids = [registry.qualified(namespace, c) for c in sorted(set(checks))]
        setattr(exc, CHECKS_ATTRIBUTE, list(getattr(exc, CHECKS_ATTRIBUTE, ())) + ids)
        raise


def fail(message: str, checks: Iterable[str] = (), namespace: str = "loop", causes: Iterable[str] = ()) -> None:
    """``pytest.fail(message, pytrace=False)``, recording ``checks`` as the ids this failure tripped
    and ``causes`` as why (most telling first)."""
    try:
        with checking(checks, namespace):
            pytest.fail(message, pytrace=False)
    except BaseException as exc:
        setattr(exc, CAUSES_ATTRIBUTE, list(dict.fromkeys(causes)))
        raise


def checks_of(exc: BaseException) -> list:
    """The qualified check ids an exception carries (see :func:`checking`)."""
    return list(getattr(exc, CHECKS_ATTRIBUTE, ()))


def causes_of(exc: BaseException) -> list:
    """The causes an exception carries (see :func:`fail`)."""
    return list(getattr(exc, CAUSES_ATTRIBUTE, ()))


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
    models = list(exploration.models)
    under = models[0] if len(models) == 1 else f"{', '.join(models[:-1])} and {models[-1]}"
    text = [f"{exploration.scenario}: {broken} of {exploration.states} crash states under {under} break "
            f"{', '.join(sorted({v.invariant for v in hits}))}.", "", first.explain()]
    if others:
        kinds: dict = {}
        for v in hits[1:]:
            kinds.setdefault((v.invariant, v.where), v)
        text.append("")
        text.append(f"The same happens at {others} more crash state{'s' if others > 1 else ''}, for example:")
        for v in list(kinds.values())[:3]:
            text.append(f"  {v.invariant} {at_point(v.where)}, {v.operation}")
    # The first crash state's cause decides the closing question; the test's own is for the rest.
    nudge = NUDGES.get(first.cause) or also_about
    if nudge:
        text += ["", nudge]
    causes = [first.cause] + [v.cause for v in hits[1:]]
    fail("\n".join(text), {v.invariant for v in hits}, causes=[c for c in causes if c])


def require(holds: object, message: str, checks: Iterable[str] = (), namespace: str = "loop",
            causes: Iterable[str] = ()) -> None:
    """Fail with ``message`` alone (no pytest locals, no traceback into the kit) unless ``holds``;
    the failure records ``checks`` as the ids it tripped, and ``causes`` as why."""
    if not holds:
        fail(message, checks, namespace, causes)
