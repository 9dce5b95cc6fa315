"""Level 4 tests: crash a run at every point, then resume from what it left with your resume_agent.

A correct loop (the level-2 solution's) runs the course's task once while every operation is
recorded. For each crash point, the checkpoint folder is rebuilt in a fresh temporary directory,
exactly as that crash left it, and your ``resume_agent`` runs there against a fresh scripted model
and a scripted ``execute_tool`` that remembers which calls the crashed run had already started (so
a table published before the crash counts). A failure names the crash point, what was on disk,
what your resume did, and what was wrong with it.
"""

import pytest

from grader.engine.conversations import generated
from grader.engine.explore import ABSOLUTE_FOLDER, NESTED_FOLDER
from grader.faces.assertions import STUDENT_TIMEOUT, fail, require
from grader.faces.plugin import rerun_command
from grader.levels.resume import b_only_writer, check_refusals, check_turn_cap, explore_resume
from grader.engine.scripted import support_tickets


@pytest.fixture
def resume_module(submission):
    module = submission.load("resume.py")
    if not callable(getattr(module, "resume_agent", None)):
        pytest.fail("resume.py has no function `resume_agent`; the tests call it by that name.", pytrace=False)
    if not (isinstance(getattr(module, "CheckpointError", None), type)
            and issubclass(module.CheckpointError, Exception)):
        pytest.fail("resume.py must define `class CheckpointError(Exception)`: the tests expect resume_agent to raise "
                    "it (or a subclass) for a checkpoint it cannot trust.", pytrace=False)
    return module


@pytest.fixture
def resumed(resume_module, crashcourse_seed, once):
    """Your resume_agent, run from every crash state of the course's task (once, read by each test)."""
    return once("resumed", lambda: explore_resume(resume_module.resume_agent, support_tickets(crashcourse_seed),
                                                  checkpoint_error=resume_module.CheckpointError,
                                                  timeout=STUDENT_TIMEOUT, directory=NESTED_FOLDER))


def assert_resumes(exploration, checks, rerun, also_about=""):
    """Fail, in the learner's words, if any of ``checks`` went wrong in ``exploration``."""
    hits = [f for f in exploration.failures if f.check in checks]
    if exploration.error or hits:
        text = exploration.report(rerun, checks)
        causes = [f.cause for f in hits if f.cause]
        if hits and all(f.cause == "finished-asked-again" for f in hits):
            also_about = "What does a checkpoint whose last message is the model's final answer say about the task?"
        fail(text + ("\n\n" + also_about if also_about else ""), {f.check for f in hits}, "resume", causes)


@pytest.mark.task(taskno=1)
@pytest.mark.points(2)
def test_a_checkpoint_you_cannot_trust_is_refused(resume_module, resumed, crashcourse_seed, request):
    """No file, a torn or empty one, the wrong shape, or an unknown version: CheckpointError, and hands off."""
    problems = check_refusals(resume_module.resume_agent, support_tickets(crashcourse_seed),
                              checkpoint_error=resume_module.CheckpointError, timeout=STUDENT_TIMEOUT)
    if problems:
        more = f"\n  - and {len(problems) - 4} more like these" if len(problems) > 4 else ""
        fail(f"{len(problems)} checkpoint{'s' if len(problems) != 1 else ''} that resume cannot trust "
             f"{'were' if len(problems) != 1 else 'was'} not refused cleanly:\n  - "
             + "\n  - ".join(problems[:4]) + more + f"\n  Re-run just this check: {rerun_command(request)}",
             ["REFUSE"], "resume")
    assert_resumes(resumed, ["REFUSE"], rerun_command(request))


@pytest.mark.task(taskno=2)
@pytest.mark.points(1)
def test_turns_and_tokens_continue_from_the_file(resumed, request):
    """After resume, turns and tokensUsed end where an uncrashed run ends them."""
    assert_resumes(resumed, ["COUNTS"], rerun_command(request),
                   also_about="Where do your counters start after a crash: at zero, or where the file says? And does "
                              "every result recorded on resume, the pending call's included, add one turn?")


@pytest.mark.task(taskno=3)
@pytest.mark.points(3)
def test_the_pending_call_is_answered_once(resumed, request):
    """A call pending in the file is answered before the model is called, and never takes effect twice."""
    assert_resumes(resumed, ["PAIRING", "ONCE", "RESUME"], rerun_command(request),
                   also_about="What does pendingToolUse tell you, and which two answers to it are honest?")


@pytest.mark.task(taskno=4)
@pytest.mark.points(1)
def test_resume_keeps_saving(resumed, request):
    """While it resumes, the loop saves at A and B as before, and ends with the final state on disk."""
    assert_resumes(resumed, ["SAVED"], rerun_command(request))


@pytest.mark.task(taskno=5)
@pytest.mark.points(1)
def test_the_turn_cap_counts_the_turns_before_the_crash(resume_module, crashcourse_seed, request):
    """With MAX_TURNS = 2, a resumed task stops after its second tool turn, wherever the crash came."""
    problems = check_turn_cap(resume_module.resume_agent, resume_module, support_tickets(crashcourse_seed), 2,
                              checkpoint_error=resume_module.CheckpointError, timeout=STUDENT_TIMEOUT)
    require(not problems, "\n".join(problems) + f"\n  Re-run just this check: {rerun_command(request)}",
            ["CAP"], "resume", causes=[p.cause for p in problems if getattr(p, "cause", "")])


@pytest.mark.task(taskno=6)
@pytest.mark.points(1)
def test_a_b_only_checkpoint_hides_the_call_in_flight(resume_module, crashcourse_seed, request):
    """Resume from a loop that saved only at point B: the one thing that goes wrong is the call in flight.

    Your resume does everything the file allows, and still a crash while `publish_table` ran makes the
    table go out twice: the file holds no trace of that call, so nothing can reconcile it. This test
    passes when exactly that, and nothing else, goes wrong (answers.md asks you why).
    """
    rerun = rerun_command(request)
    exploration = explore_resume(resume_module.resume_agent, support_tickets(crashcourse_seed),
                                 checkpoint_error=resume_module.CheckpointError, writer=b_only_writer,
                                 timeout=STUDENT_TIMEOUT)
    others = [f.check for f in exploration.failures if f.check != "ONCE"]
    if exploration.error or others:
        fail("Your resume goes wrong on a B-only checkpoint in ways the file does not excuse; make tasks 1 "
             "to 4 pass first.\n\n" + exploration.report(rerun, set(others) or None), others, "resume",
             [f.cause for f in exploration.failures if f.cause])
    hidden = [f for f in exploration.failures if "no trace" in f.detail]
    require(hidden, "resuming from the B-only checkpoints published the table only once; the crash while "
                    "`publish_table` ran should have made it go out twice. Does resume_agent run the tools the "
                    "model asks for?")
    require(all("publish_table" in f.detail and "publish_table" in f.where for f in exploration.failures),
            exploration.report(rerun))


@pytest.mark.task(taskno=7)
@pytest.mark.points(1)
def test_every_crash_state_of_generated_conversations(resume_module, crashcourse_seed, request):
    """The same checks on conversations of 0 to 4 turns with unicode and large tool results."""
    rerun = rerun_command(request)

    examples = request.config._crashcourse_examples
    for scenario in generated(crashcourse_seed, examples, max_turns=4):
        exploration = explore_resume(resume_module.resume_agent, scenario,
                                     checkpoint_error=resume_module.CheckpointError, timeout=STUDENT_TIMEOUT,
                                     directory=ABSOLUTE_FOLDER)
        assert_resumes(exploration, ["REFUSE", "COUNTS", "PAIRING", "ONCE", "RESUME", "SAVED"], rerun)
