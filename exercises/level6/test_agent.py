"""Level 6 tests: the crash guarantees of level 2, at a cost per turn that does not grow.

Your files are read only through your `load_checkpoint`: for each crash state (the process killed
between two operations, M1, or in the middle of a write, M2) the grader writes the files the crash
would leave into a scratch folder and asks your loader what it finds there. The bytes your loop
writes come from the same recording, counted exactly, on a task of 200 turns.
"""

import pytest

from grader.engine.conversations import generated
from grader.engine.explore import ABSOLUTE_FOLDER, NESTED_FOLDER
from grader.faces.assertions import (STUDENT_TIMEOUT, assert_holds, describe_final_file, fail, finished_failure,
                                      require)
from grader.levels.journal import LONG_TURNS, explore_journal, long_conversation
from grader.faces.plugin import rerun_command
from grader.engine.scripted import support_tickets

MODELS = ("M1", "M2")
KILLED = ["PARSE", "FIELDS", "WHOLE", "ATOMIC-DIR", "TRACE", "PAIRING", "FRESH", "COUNTS"]


@pytest.fixture
def run_agent(submission):
    return submission.function("agent.py", "run_agent")


@pytest.fixture
def load_checkpoint(submission):
    # Each load runs in a new process that imports your module afresh: the loader sees only the
    # files, never the memory of the run.
    return submission.function("agent.py", "load_checkpoint")


@pytest.fixture
def tickets(run_agent, load_checkpoint, crashcourse_seed, once):
    """Your loop on the course's task, every crash state read back through your loader (run once)."""
    return once("tickets", lambda: explore_journal(run_agent, load_checkpoint, support_tickets(crashcourse_seed),
                                                   models=MODELS, timeout=STUDENT_TIMEOUT,
                                                   directory=NESTED_FOLDER, rerun=True).crashes)


@pytest.fixture
def long_run(run_agent, load_checkpoint, crashcourse_seed, once):
    """Your loop on a task of 200 turns: the bytes it writes, and a sample of its crash states (run once)."""
    return once("long", lambda: explore_journal(run_agent, load_checkpoint,
                                                long_conversation(LONG_TURNS, seed=crashcourse_seed), models=MODELS,
                                                timeout=STUDENT_TIMEOUT * 3, sample=True, measure=True))


def holds_on_both(tickets, long_run, invariants, rerun, **words):
    """The course's task first; then, if the long run itself went through (task 3 tells it when it did
    not), its sample of crash states, compactions included."""
    assert_holds(tickets, invariants, rerun, **words)
    if not long_run.crashes.error and not long_run.crashes.unseen:
        assert_holds(long_run.crashes, invariants, rerun, **words)


@pytest.mark.task(taskno=1)
@pytest.mark.points(1)
def test_the_loop_finishes_and_the_loader_reads_the_final_state(tickets, request):
    """Uncrashed, the loop runs every tool once, and load_checkpoint on its folder returns the final state."""
    assert_holds(tickets, [], rerun_command(request))
    final = tickets.returned
    on_disk = (describe_final_file(tickets.final_file) if tickets.final_file is not None
               else "your journal's files, which task 2 reads back through load_checkpoint")
    problem, causes = finished_failure(final, on_disk, 3, "the task makes 3 tool calls", pending=False,
                                       rerun=rerun_command(request))
    require(problem is None, problem, causes=causes)


@pytest.mark.task(taskno=2)
@pytest.mark.points(2)
def test_every_crash_state_loads_as_one_whole_save(tickets, long_run, request):
    """Wherever the process dies, your loader returns one whole save: never an error, a mix, or an older one."""
    holds_on_both(tickets, long_run, ["PARSE", "FIELDS", "WHOLE", "ATOMIC-DIR", "RERUN"], rerun_command(request),
                  also_about="What can a crash leave between two steps of your save (a file emptied, the last piece "
                             "of a file cut short, a file your snapshot names and that is gone), and what does your "
                             "loader do with it?")


@pytest.mark.task(taskno=2)
@pytest.mark.points(2)
def test_every_tool_call_that_starts_is_still_on_disk(tickets, long_run, request):
    """Save points A and B are still there: a started call is pending or answered, counters agree."""
    holds_on_both(tickets, long_run, ["TRACE", "PAIRING", "FRESH", "COUNTS"], rerun_command(request))


@pytest.mark.task(taskno=3)
@pytest.mark.points(4)
def test_the_bytes_written_grow_linearly_with_the_turns(long_run, request):
    """Over a 200-turn task the total bytes written stay a small multiple of the conversation itself.
    (Task 2's tests read the same run's crash states: this one judges only its bytes.)"""
    assert_holds(long_run.crashes, [], rerun_command(request))
    if not long_run.bytes.ok:
        fail(f"{long_run.bytes.explain()}\n  Re-run just this check: {rerun_command(request)}", ["BYTES"])


@pytest.mark.task(taskno=4)
@pytest.mark.points(1)
def test_every_crash_state_of_generated_conversations(run_agent, load_checkpoint, crashcourse_seed, request):
    """The same guarantees on conversations of 0 to 12 turns with unicode and large tool results."""
    rerun = rerun_command(request)

    examples = request.config._crashcourse_examples
    for scenario in generated(crashcourse_seed, examples):
        exploration = explore_journal(run_agent, load_checkpoint, scenario, models=MODELS, timeout=STUDENT_TIMEOUT,
                                      directory=ABSOLUTE_FOLDER)
        assert_holds(exploration.crashes, KILLED, rerun)
