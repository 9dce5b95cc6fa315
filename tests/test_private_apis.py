"""The three private names of pytest and Hypothesis the kit leans on, checked by name.

pyproject.toml bounds both libraries from above. When a new major version is allowed, these
tests say at once whether the names still exist, instead of letting the grader quietly slow down
(no shared configuration for the judges) or draw different conversations in different places
(Hypothesis's constants from loaded modules). What to do when one fails: read the comment of the
code it names, find the new way, then move the bound in pyproject.toml.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parent.parent


def test_pytest_still_has_the_config_step_the_judges_share():
    """grader.grading.judge.prepare_config parses the judges' command line once, before they fork."""
    from _pytest.config import _prepareconfig  # noqa: F401 - the name under test

    from grader.grading.judge import prepare_config

    config = prepare_config(str(KIT / "exercises" / "level2"), examples=1)
    assert isinstance(config, pytest.Config), "prepare_config fell back: pytest's _prepareconfig changed"
    assert callable(getattr(config, "_ensure_unconfigure", None)), \
        "run_judge ends a shared configuration with Config._ensure_unconfigure, which this pytest lacks"
    config._ensure_unconfigure()


def test_hypothesis_still_draws_local_constants_where_the_kit_turns_them_off():
    """grader.engine.conversations._without_local_constants replaces this method while it draws."""
    providers = pytest.importorskip("hypothesis.internal.conjecture.providers",
                                    reason="an older Hypothesis, which never mixes in local constants")
    method = providers.HypothesisProvider.__dict__.get("_maybe_draw_constant")
    assert method is not None, "Hypothesis renamed _maybe_draw_constant: generated conversations may now " \
                               "depend on which modules were imported first (see grader.engine.conversations)"
    assert "self" in inspect.signature(method).parameters
