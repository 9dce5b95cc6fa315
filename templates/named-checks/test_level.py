"""Level NUMBER tests: each test runs one of the level's named checks on your checkpoint.py."""

import pytest

from grader.faces.assertions import fail
from grader.levels.toy_checks import LEVEL   # your level module (the manifest's "module")


@pytest.fixture
def checkpoint(submission):
    """Your checkpoint.py, imported fresh for each test."""
    module = submission.load("checkpoint.py")
    for name in ("save_checkpoint", "load_checkpoint"):
        if not callable(getattr(module, name, None)):
            pytest.fail(f"checkpoint.py has no function `{name}`; the tests call it by that name.", pytrace=False)
    return module


def expect(check_id, checkpoint, seed):
    """Fail with the check's story (and record its id and causes as data) when it does not hold."""
    problem, causes = LEVEL.verdict(check_id, checkpoint, seed)
    if problem:
        fail(problem, [check_id], LEVEL.namespace, causes)


@pytest.mark.task(taskno=1)
@pytest.mark.points(2)
def test_what_is_saved_comes_back_unchanged(checkpoint, crashcourse_seed):
    """save_checkpoint, then load_checkpoint: the same state, every field."""
    expect("round-trip", checkpoint, crashcourse_seed)


@pytest.mark.task(taskno=2)
@pytest.mark.points(1)
def test_a_folder_with_no_checkpoint_loads_as_none(checkpoint, crashcourse_seed):
    """Before the first save there is no file: load_checkpoint returns None."""
    expect("no-file", checkpoint, crashcourse_seed)
