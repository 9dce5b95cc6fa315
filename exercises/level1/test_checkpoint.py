"""Level 1 tests: save the six fields, then prove each one by crashing a run and resuming it.

Each resume test runs the protocol's agent loop on a scripted model (no network) with your
save_checkpoint at every save point, kills it at a chosen moment, and resumes from what is on disk
with your load_checkpoint and the kit's reference resume (a turn cap, a spend budget on
tokensUsed, and a pending tool call answered before anything else). A failure says what was on
disk, what the resume ran into, and what to try.
"""

import pytest

from grader.faces.assertions import fail
from grader.levels import fields as driver


@pytest.fixture
def checkpoint(submission):
    """Your checkpoint.py, imported fresh for each test."""
    module = submission.load("checkpoint.py")
    for name in ("save_checkpoint", "load_checkpoint"):
        if not callable(getattr(module, name, None)):
            pytest.fail(f"checkpoint.py has no function `{name}`; the tests call it by that name.", pytrace=False)
    return module


def expect(check_id, checkpoint, seed):
    """Run level 1's check ``check_id`` (an id of grader.levels.registry's "fields"); fail with the
    resume's story, not a traceback, when it finds a problem."""
    problem = driver.LEVEL1_CHECKS[check_id](checkpoint, seed)
    if problem:
        fail(problem, [check_id], "fields", causes=[getattr(problem, "cause", "")] if getattr(problem, "cause", "") else [])


@pytest.mark.task(taskno=1)
@pytest.mark.points(2)
def test_the_file_holds_exactly_the_six_fields(checkpoint, crashcourse_seed):
    """After every save: version, task, turns, tokensUsed, messages, pendingToolUse, with the loop's values."""
    expect("fields", checkpoint, crashcourse_seed)


@pytest.mark.task(taskno=2)
@pytest.mark.points(1)
def test_without_turns_the_turn_cap_overshoots(checkpoint, crashcourse_seed):
    """A task capped at 4 turns, killed after 3, may run only 1 more turn after resume."""
    expect("turns", checkpoint, crashcourse_seed)


@pytest.mark.task(taskno=2)
@pytest.mark.points(1)
def test_without_tokens_used_the_spend_budget_trips_late(checkpoint, crashcourse_seed):
    """The spend budget trips at the same model response as it would have without the crash."""
    expect("tokensUsed", checkpoint, crashcourse_seed)


@pytest.mark.task(taskno=2)
@pytest.mark.points(1)
def test_without_version_a_future_format_loads_silently(checkpoint, crashcourse_seed):
    """Your own file resumes; a version-2 file is refused with UnsupportedVersion."""
    expect("version", checkpoint, crashcourse_seed)


@pytest.mark.task(taskno=2)
@pytest.mark.points(1)
def test_without_task_resume_cannot_say_what_it_resumes(checkpoint, crashcourse_seed):
    """Resume reports the user's task, in words, from the file alone."""
    expect("task", checkpoint, crashcourse_seed)


@pytest.mark.task(taskno=2)
@pytest.mark.points(1)
def test_without_messages_resume_starts_over(checkpoint, crashcourse_seed):
    """Resume continues the conversation instead of running every tool again."""
    expect("messages", checkpoint, crashcourse_seed)


@pytest.mark.task(taskno=2)
@pytest.mark.points(1)
def test_without_pending_tool_use_a_crash_mid_tool_goes_unnoticed(checkpoint, crashcourse_seed):
    """Killed while a tool runs, the file says which call was cut off, and resume answers it first."""
    expect("pendingToolUse", checkpoint, crashcourse_seed)


@pytest.mark.task(taskno=3)
@pytest.mark.points(2)
def test_load_refuses_versions_it_does_not_know(checkpoint, crashcourse_seed):
    """Version 2, version 0 and a missing version raise UnsupportedVersion."""
    expect("load-version", checkpoint, crashcourse_seed)


@pytest.mark.task(taskno=3)
@pytest.mark.points(2)
def test_load_refuses_a_file_it_cannot_resume_from(checkpoint, crashcourse_seed):
    """A missing field, a JSON value that is not an object, or a file that is not JSON raise CheckpointError."""
    expect("load-shape", checkpoint, crashcourse_seed)


@pytest.mark.task(taskno=3)
@pytest.mark.points(1)
def test_load_returns_a_good_file_as_it_is(checkpoint, crashcourse_seed):
    """A complete version-1 checkpoint comes back unchanged."""
    expect("load-accepts", checkpoint, crashcourse_seed)
