"""Level 5 tests: a turn that names several tools, crashed at every point.

Each test runs your loop once on a scripted model whose turns name two or three tools at once (no
network), records every file operation, then rebuilds the checkpoint directory as a crash would
leave it at each point: the process killed between two operations (M1), or in the middle of a
write (M2). A failure tells you where the crash landed (which call of which turn), what was on
disk, and what a resume would have run into.
"""

import pytest

from grader.engine.conversations import generated

from grader.engine.explore import ABSOLUTE_FOLDER, NESTED_FOLDER
from grader.faces.assertions import (STUDENT_TIMEOUT, assert_holds, describe_final_file, finished_failure,
                                      require)
from grader.levels.parallel_calls import explore_parallel, parallel_tickets
from grader.faces.plugin import rerun_command

MODELS = ("M1", "M2")


@pytest.fixture
def run_agent(submission):
    return submission.function("agent.py", "run_agent")


@pytest.fixture
def tickets(run_agent, crashcourse_seed, once):
    """Your loop on the course's task with parallel calls, every crash state checked (run once, read by each test)."""
    return once("tickets", lambda: explore_parallel(run_agent, parallel_tickets(crashcourse_seed), models=MODELS,
                                                    timeout=STUDENT_TIMEOUT, directory=NESTED_FOLDER, rerun=True))


@pytest.mark.task(taskno=1)
@pytest.mark.points(1)
def test_the_loop_still_finishes_the_task(tickets, request):
    """Uncrashed, every call runs once, each turn's results sit in one user message, the answer ends it."""
    assert_holds(tickets, ["ONCE"], rerun_command(request))
    final = tickets.returned
    problem, causes = finished_failure(final, describe_final_file(tickets.final_file), 7,
                                       "the task makes 7 tool calls in 3 turns, and each result counts",
                                       rerun=rerun_command(request))
    require(problem is None, problem, causes=causes)


@pytest.mark.task(taskno=2)
@pytest.mark.points(3)
def test_every_call_the_model_named_is_on_disk_before_any_runs(tickets, request):
    """At save point A, pendingToolUse lists every call of the turn; a call leaves it when its result lands."""
    assert_holds(tickets, ["TRACE", "PAIRING", "FIELDS"], rerun_command(request),
                 also_about="How many tool_use blocks can one assistant message hold, and how many does the file list?")


@pytest.mark.task(taskno=3)
@pytest.mark.points(3)
def test_each_result_is_on_disk_before_the_next_call_starts(tickets, request):
    """A result that came back is saved before the loop starts another tool or calls the model."""
    assert_holds(tickets, ["KEPT", "FRESH"], rerun_command(request),
                 also_about="If the process dies while a later tool runs, what becomes of a result that already came back?")


@pytest.mark.task(taskno=3)
@pytest.mark.points(2)
def test_no_result_is_lost_or_doubled_and_the_counts_agree(tickets, request):
    """Every save is whole, each result appears once, and turns counts the results recorded."""
    assert_holds(tickets, ["PARSE", "WHOLE", "ONCE", "COUNTS", "ATOMIC-DIR", "RERUN"], rerun_command(request))


@pytest.mark.task(taskno=4)
@pytest.mark.points(1)
def test_every_crash_state_of_generated_conversations(run_agent, crashcourse_seed, request):
    """The same guarantees on conversations of 0 to 6 turns of 1 to 3 calls, with unicode and large results."""
    rerun = rerun_command(request)

    examples = request.config._crashcourse_examples
    for scenario in generated(crashcourse_seed, examples, "parallel"):
        exploration = explore_parallel(run_agent, scenario, models=MODELS, timeout=STUDENT_TIMEOUT,
                                       directory=ABSOLUTE_FOLDER)
        assert_holds(exploration, ["PARSE", "FIELDS", "WHOLE", "ATOMIC-DIR", "TRACE", "PAIRING", "KEPT", "FRESH",
                                   "COUNTS", "ONCE"], rerun)
