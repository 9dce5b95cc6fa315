"""Level 2 tests: crash run_agent at every point and read what each crash leaves on disk.

Each test runs your loop once on a scripted model (no network), records every file operation,
then rebuilds the checkpoint directory as it would be after a crash at each point: the process
killed between two operations (M1), or in the middle of a write (M2). A failure tells you where
the crash landed, what was on disk, and what a resume would have run into.
"""

import pytest

from grader.engine.conversations import generated
from grader.engine.explore import ABSOLUTE_FOLDER, NESTED_FOLDER, explore_loop
from grader.engine.invariants import final_save_problem
from grader.faces.assertions import (STUDENT_TIMEOUT, assert_holds, describe_final_file, finished_failure,
                                      require)
from grader.faces.plugin import rerun_command
from grader.engine.scripted import support_tickets

MODELS = ("M1", "M2")


@pytest.fixture
def run_agent(submission):
    return submission.function("agent.py", "run_agent")


@pytest.fixture
def tickets(run_agent, crashcourse_seed, once):
    """Your loop on the course's task, with every crash state checked (run once, read by each test)."""
    return once("tickets", lambda: explore_loop(run_agent, support_tickets(crashcourse_seed), models=MODELS,
                                                timeout=STUDENT_TIMEOUT, directory=NESTED_FOLDER, rerun=True))


@pytest.mark.task(taskno=1)
@pytest.mark.points(1)
def test_the_loop_still_finishes_the_task(tickets, request):
    """Uncrashed, the loop runs every tool once, ends on the model's answer, and saves only the six fields."""
    assert_holds(tickets, ["FIELDS"], rerun_command(request),
                 also_about="Save exactly version, task, turns, tokensUsed, messages and pendingToolUse; anything "
                            "else the loop keeps in memory stays out of the file.")
    final = tickets.returned
    problem, causes = finished_failure(final, describe_final_file(tickets.final_file), 3,
                                       "the task makes 3 tool calls", rerun=rerun_command(request))
    require(problem is None, problem, causes=causes)
    unsaved = final_save_problem(tickets.final_file, final)
    require(not unsaved, f"{unsaved}.\n  Re-run just this check: {rerun_command(request)}\n\nWhat is on disk after "
            "the model's last answer has been appended? Compare it with what run_agent returns.",
            ["WHOLE"], causes=["no-final-save"])


@pytest.mark.task(taskno=2)
@pytest.mark.points(3)
def test_a_crash_mid_save_never_leaves_half_a_file(tickets, request):
    """Wherever the process dies, checkpoint.json is one whole save: never torn, never a mix, and the
    next run in the folder the crash left (a temp file in it) saves just as well."""
    assert_holds(tickets, ["PARSE", "WHOLE", "RERUN"], rerun_command(request),
                 also_about="Think about where the new bytes go while they are being written.")


@pytest.mark.task(taskno=2)
@pytest.mark.points(1)
def test_the_temp_file_sits_beside_the_checkpoint(tickets, request):
    """The temp file is renamed within one directory, so the rename is atomic."""
    assert_holds(tickets, ["ATOMIC-DIR"], rerun_command(request),
                 also_about="Which folder is your temp file in? Put it beside checkpoint.json (with tempfile, pass "
                            "dir=directory).")


@pytest.mark.task(taskno=3)
@pytest.mark.points(3)
def test_every_tool_call_that_starts_is_on_disk(tickets, request):
    """A crash while a tool runs leaves that call on disk, as pendingToolUse."""
    assert_holds(tickets, ["TRACE", "PAIRING"], rerun_command(request),
                 also_about="Which save point does this loop never reach?")


@pytest.mark.task(taskno=3)
@pytest.mark.points(1)
def test_the_file_is_current_when_the_model_is_called(tickets, request):
    """By the time the model is called, the result is recorded and nothing is left pending; counters agree."""
    assert_holds(tickets, ["FRESH", "COUNTS"], rerun_command(request),
                 also_about="What does the file say at the moment the model is called? Count the turn and clear "
                            "pendingToolUse once the result is in messages, then save, before calling the model.")


@pytest.mark.task(taskno=4)
@pytest.mark.points(1)
def test_every_crash_state_of_generated_conversations(run_agent, crashcourse_seed, request):
    """The same guarantees on conversations of 0 to 12 turns with unicode and large tool results."""
    rerun = rerun_command(request)

    examples = request.config._crashcourse_examples
    for scenario in generated(crashcourse_seed, examples):
        exploration = explore_loop(run_agent, scenario, models=MODELS, timeout=STUDENT_TIMEOUT,
                                   directory=ABSOLUTE_FOLDER)
        assert_holds(exploration, ["PARSE", "FIELDS", "WHOLE", "ATOMIC-DIR", "TRACE", "PAIRING", "FRESH", "COUNTS"],
                     rerun)
