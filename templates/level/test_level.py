"""Level NUMBER tests: crash run_agent at every point and read what each crash leaves on disk."""

import pytest

from grader.engine.explore import explore_loop
from grader.engine.scripted import support_tickets
from grader.faces.assertions import STUDENT_TIMEOUT, assert_holds
from grader.faces.plugin import rerun_command

MODELS = ("M1", "M2")  # keep these equal to the manifest's crash_models, so the matrix shows this run


@pytest.fixture
def tickets(submission, crashcourse_seed, once):
    run_agent = submission.function("agent.py", "run_agent")
    return once("tickets", lambda: explore_loop(run_agent, support_tickets(crashcourse_seed), models=MODELS,
                                                timeout=STUDENT_TIMEOUT))


@pytest.mark.task(taskno=1)
@pytest.mark.points(1)
def test_a_crash_mid_save_never_leaves_half_a_file(tickets, request):
    """Wherever the crash lands, checkpoint.json is one whole save."""
    assert_holds(tickets, ["PARSE", "WHOLE"], rerun_command(request))


@pytest.mark.task(taskno=2)
@pytest.mark.points(1)
def test_every_tool_call_that_starts_is_on_disk(tickets, request):
    """A tool that has started is pending in the file, or its result is."""
    assert_holds(tickets, ["FIELDS", "TRACE", "PAIRING", "FRESH", "COUNTS", "ATOMIC-DIR"], rerun_command(request))
