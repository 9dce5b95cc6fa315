"""Level 3 tests: crash run_agent at every point, now with the power cut as well as the process killed.

Each test runs your loop once on a scripted model (no network), records every file operation, and
rebuilds the checkpoint directory as a crash at each point would leave it. Besides a killed process
(M1) and a torn write (M2), the power may go out: unsynced file data is lost (M3), unsynced
operations land in any order (M4), or a rename or a new file or folder is lost until its directory
is fsynced (M5). DURABLE fails when a save that had returned is undone by such a crash.
"""

import json
import os

import pytest

from grader.engine.conversations import generated
from grader.engine.forwarded import FSYNC_OF_A_FILE, FSYNC_OF_A_FOLDER, OPENING_A_FOLDER, MisbehavingOs
from grader.engine.explore import ABSOLUTE_FOLDER, NESTED_FOLDER, explore_loop, parent_exists, working_in
from grader.engine.hangs import time_limit
from grader.faces.assertions import STUDENT_TIMEOUT, assert_holds, describe_final_file, finished_failure, require
from grader.faces.plugin import rerun_command
from grader.engine.scripted import support_tickets

KILLED = ("M1", "M2")
POWER_CUT = ("M1", "M2", "M3", "M4", "M5")
SAMPLE = {"version": 1, "task": "Sort the tickets", "turns": 1, "tokensUsed": 120, "pendingToolUse": None,
          "messages": [{"role": "user", "content": "Sort the tickets"}]}


@pytest.fixture
def run_agent(submission):
    return submission.function("agent.py", "run_agent")


@pytest.fixture
def crash(run_agent, crashcourse_seed, once):
    """``crash(models)``: your loop on the course's task, every crash state under ``models`` checked."""
    return lambda models: once(("tickets", tuple(models)), lambda: explore_loop(
        run_agent, support_tickets(crashcourse_seed), models=models, timeout=STUDENT_TIMEOUT,
        directory=NESTED_FOLDER, before=parent_exists, rerun=tuple(models) == KILLED))


@pytest.mark.task(taskno=1)
@pytest.mark.points(1)
def test_a_killed_process_still_leaves_a_whole_current_file(crash, request):
    """Level 2's guarantees still hold: whole saves, at both save points, counters right."""
    exploration = crash(KILLED)
    assert_holds(exploration, ["PARSE", "WHOLE", "ATOMIC-DIR", "TRACE", "PAIRING", "FRESH", "COUNTS", "RERUN"],
                 rerun_command(request))
    # And the loop still runs the task to its end (a run_agent changed by mistake can stop early).
    problem, causes = finished_failure(exploration.returned, describe_final_file(exploration.final_file), 3,
                                       "the task makes 3 tool calls, and each result counts",
                                       rerun=rerun_command(request))
    require(problem is None, problem, causes=causes)


@pytest.mark.task(taskno=2)
@pytest.mark.points(3)
def test_the_data_is_on_disk_before_the_rename(crash, request):
    """M3: the power goes out and unsynced file data is lost, but the rename is kept."""
    assert_holds(crash(("M3",)), ["DURABLE"], rerun_command(request),
                 also_about="Which bytes had reached the disk itself, not only the operating system, when "
                            "the temp file took the checkpoint's name?")


@pytest.mark.task(taskno=3)
@pytest.mark.points(3)
def test_a_save_that_returned_is_never_undone(crash, request):
    """M4 and M5: a rename, or a folder the loop made, may be lost until its directory is fsynced."""
    exploration = crash(("M4", "M5"))
    # Show a rolled-back or vanished file first: an empty file here is task 2's lesson again.
    exploration.violations.sort(key=lambda v: not ("older save" in v.detail or "no checkpoint.json" in v.detail))
    assert_holds(exploration, ["DURABLE"], rerun_command(request),
                 also_about="A rename changes a directory, not a file. Which directory, and has it been "
                            "fsynced by the time save_checkpoint returns? Was the folder itself new?")


# -- Task 4: platforms ---------------------------------------------------------------------------------
#
# These two run save_checkpoint directly, with the operating system made to misbehave for some calls.
# In your own pytest run the check patches `os` in this process (run_here). Under `crashcourse grade`
# your code runs in a box of its own, and the kernel fails the same calls from outside it (the
# grader's `run_with_fault`): the same steps, the same verdicts. They are plain functions so the
# kit's own tests can reuse them.

class FaultRun:
    """What a check reads after its steps: what they returned, the calls the fault hit, whether a
    whole-disk sync ran after the fault was armed, and the files left (``read``). ``note`` and
    ``exact``: under grade, what a finding adds about how the fault was made, and whether it hit
    exactly the calls asked for (here, always)."""

    note, exact = None, True

    def __init__(self, value, failed, whole_syncs, workdir):
        self.value, self.failed, self.whole_syncs, self.workdir = value, failed, whole_syncs, workdir

    def read(self, relative):
        try:
            with open(os.path.join(self.workdir, relative), "rb") as f:
                return f.read()
        except OSError:
            return None


def run_here(fault, steps, workdir):
    """Run ``steps(arm)`` in ``workdir``, in this process; from ``arm()`` on, ``os`` misbehaves as
    ``fault`` says (see MisbehavingOs: which calls fail, once or every time, on which platform)."""
    faulty = MisbehavingOs(fault)
    # working_in: the system temp folder is another file system, as in the box (grade's faults run there).
    with working_in(workdir):
        try:
            with time_limit(STUDENT_TIMEOUT):  # a save that never returns is stopped, and told where it was
                value = steps(faulty.arm)
        finally:
            faulty.undo()
    return FaultRun(value, faulty.failed, faulty.whole_syncs, workdir)


def run_with_fault(submission, fault, steps, workdir):
    """``steps(arm)`` with ``fault`` from ``arm()`` on: by the kernel under ``crashcourse grade``, else here."""
    from_outside = getattr(submission, "run_with_fault", None)
    if from_outside is not None:
        old = os.getcwd()
        os.chdir(workdir)  # the code runs in this folder (calls carry the working folder)
        try:
            return from_outside(fault, steps, workdir)
        finally:
            os.chdir(old)
    return run_here(fault, steps, workdir)


class _Unreadable:
    """A checkpoint.json that is there but is not one JSON document: equal to no state."""

    def __init__(self, raw):
        self.raw = raw

    def __eq__(self, other):
        return False

    __hash__ = None

    def __str__(self):
        return "it is empty" if not self.raw else f"it holds {len(self.raw):,} bytes that are not one JSON document"


def _checkpoint(run):
    data = run.read(os.path.join("checkpoints", "checkpoint.json"))
    if data is None:
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except ValueError:  # (UnicodeDecodeError is one too)
        return _Unreadable(data)


def _noted(problem, run):
    if problem is None and not run.exact:
        return run.note  # under grade, the fault could not be made as the check asks: nothing to score
    return problem if problem is None or not run.note else f"{problem}\n\n{run.note}"


def problem_where_folders_cannot_be_opened(submission, workdir):
    """Save twice where opening a folder raises PermissionError, os.O_DIRECTORY does not exist and
    sys.platform is "win32" (as on Windows). Returns what went wrong, or None."""
    first = dict(SAMPLE)
    second = dict(SAMPLE, turns=2, tokensUsed=300)

    def steps(arm):
        arm()
        module = submission.load("agent.py")  # loaded now, so `from os import open` sees this platform too
        for state in (first, second):
            try:
                module.save_checkpoint(state, "checkpoints")
            except Exception as exc:  # noqa: BLE001 - any exception is the finding
                return (f"save_checkpoint raised {type(exc).__name__}: {exc}. On a platform where a folder cannot "
                        "be opened, the save itself still works: only the directory fsync has to be skipped")
        return None

    run = run_with_fault(submission, {"fails": OPENING_A_FOLDER, "platform": "windows"}, steps, workdir)
    if run.value:
        return _noted(run.value, run)
    on_disk = _checkpoint(run)
    return _noted(None if on_disk == second else "after two saves checkpoint.json does not hold the second state"
                  + (f": {on_disk}" if isinstance(on_disk, _Unreadable) else ""), run)


FSYNC_FAULTS = ("file, always", "file, once", "folder, always", "folder, once")


def problem_when_fsync_fails(submission, workdir, fault="file, always"):
    """Save once, then save again while fsync (or fdatasync) reports an I/O error (EIO). Returns what
    went wrong, or None.

    ``fault`` says which fsync fails and how often: of the file or of the folder, every time or only
    the first time (then it succeeds). "Once" is the trap: on Linux a failed fsync may have dropped
    the data, and a second fsync then reports success, so trying again proves nothing. A write to a
    file opened with O_SYNC is its own fsync: in the file modes it fails with EIO as well.
    """
    on_file = fault.startswith("file")
    once = fault.endswith("once")

    def steps(arm):
        try:
            submission.load("agent.py").save_checkpoint(dict(SAMPLE), "checkpoints")
        except Exception as exc:  # noqa: BLE001 - any exception is the finding
            return f"the first save, before any fault, raised {type(exc).__name__}: {exc}"
        arm()
        module = submission.load("agent.py")
        try:
            module.save_checkpoint(dict(SAMPLE, turns=2, tokensUsed=300), "checkpoints")
        except OSError:
            return True
        return False

    fails = FSYNC_OF_A_FILE if on_file else FSYNC_OF_A_FOLDER
    run = run_with_fault(submission, {"fails": fails, "once": once, "baseline": "two saves"}, steps, workdir)
    if isinstance(run.value, str):
        return run.value  # the save fails with no fault at all: that is the finding
    return _noted(_fsync_finding(run, on_file, once), run)


def _fsync_finding(run, on_file, once):
    """What went wrong in ``run`` (``run.value``: whether the second save raised), or None."""
    if not run.value:
        what = "the file it wrote" if on_file else "the folder"
        if not run.failed:
            if not on_file:
                return None  # no folder fsync at all: the power-cut models (M5) already say so
            if run.whole_syncs:
                return ("save_checkpoint made its data durable with os.sync(), which cannot report an I/O "
                        "error: the disk refused the data and the save returned as if it were safe. fsync the "
                        "file instead (it raises OSError on EIO)")
            return ("save_checkpoint never called os.fsync on the file it wrote, so its data may still be only "
                    "in the operating system's cache when the save returns")
        if once:
            return (f"fsync of {what} reported an I/O error; save_checkpoint tried again, the second fsync "
                    "reported success, and it returned as if the save were safe. On Linux a failed fsync may "
                    "already have dropped the data, and the retry only says nothing new failed since. After "
                    "EIO, raise: do not retry")
        return (f"fsync of {what} reported an I/O error, yet save_checkpoint returned as if the save were safe. "
                "The caller will go on and run the next tool, trusting a save that may not be on disk")
    if not on_file:
        return None  # the rename came before the folder's fsync: raising is all that can be asked
    on_disk = _checkpoint(run)
    if on_disk is None:
        return ("after the failed save there is no checkpoint.json at all: the previous save, which had "
                "returned, is gone")
    if isinstance(on_disk, _Unreadable):
        return (f"after the failed save checkpoint.json cannot be read ({on_disk}), so there is no save to "
                "resume from, not even the one before")
    if on_disk != SAMPLE:
        return ("the failed save still replaced checkpoint.json: the file now points at data the disk "
                "said it could not store, instead of the previous save")
    return None


def _story(headline, did, problem, tip, rerun):
    """Task 4's findings told the way every failure of the kit is: what happened, what the check did,
    what is wrong, what to try, and the command that re-runs it."""
    return "\n".join([headline, f"  What the check did: {did}.", f"  What is wrong: {problem}.",
                      f"  What to try: {tip}", f"  Re-run just this check: {rerun}"])


def _fsync_tip(problem):
    """What to try for a finding of :func:`problem_when_fsync_fails`, by what it found."""
    if "before any fault" in problem:
        return "make a save with no fault at all work first: the failure of the first task that fails says why it raised."
    if "never called os.fsync" in problem:
        return "inside the `with` block, call f.flush() and then os.fsync(f.fileno()), before the rename."
    if "os.sync()" in problem:
        return "fsync the file itself: os.fsync(f.fileno()) raises OSError when the disk refuses the data."
    if "tried again" in problem:
        return "after the first OSError from fsync, let it propagate: a second fsync that succeeds proves nothing."
    if "checkpoint.json" in problem:
        return ("fsync the temp file before the rename and let its OSError stop the save there: the rename never "
                "runs, and the previous checkpoint stays.")
    return "let the OSError from os.fsync reach the caller: do not catch it, or raise it again after tidying up."


@pytest.mark.task(taskno=4)
@pytest.mark.points(1)
def test_saving_where_a_folder_cannot_be_opened(submission, tmp_path, request):
    """On a platform that will not open a folder, save_checkpoint still saves (and skips only that sync)."""
    problem = problem_where_folders_cannot_be_opened(submission, tmp_path)
    tip = ("open the folder inside try/except OSError and skip only its fsync when it cannot be opened; the "
           "file's fsync and the rename still run." if problem and problem.startswith("save_checkpoint raised")
           else "make sure each save still ends with the rename when the folder's fsync is skipped.")
    require(problem is None, _story(
        "save_checkpoint did not save on a platform where a folder cannot be opened (as on Windows).",
        'two saves, with opening a folder raising PermissionError, no os.O_DIRECTORY, and sys.platform "win32"',
        problem, tip, rerun_command(request)))


@pytest.mark.task(taskno=4)
@pytest.mark.points(1)
def test_a_failed_fsync_is_not_swallowed(submission, tmp_path, request):
    """If fsync of the temp file or of the folder fails, once or every time, save_checkpoint raises (it
    does not retry), and after a failed file fsync the previous checkpoint stays."""
    for fault in FSYNC_FAULTS:
        folder = tmp_path / fault.replace(", ", "-")
        folder.mkdir()
        problem = problem_when_fsync_fails(submission, folder, fault)
        what = "the file it wrote" if fault.startswith("file") else "the folder"
        once = fault.endswith("once")
        how = (f"only the first fsync of {what} reported EIO (an I/O error), and later ones succeeded" if once
               else f"every fsync of {what} reported EIO (an I/O error)")
        require(problem is None, _story(
            f"When fsync of {what} fails{' once' if once else ''}, save_checkpoint must raise and leave the "
            "previous save in place: this one did not.",
            f"one save, then a second during which {how}", problem, _fsync_tip(problem or ""),
            rerun_command(request)))


@pytest.mark.task(taskno=5)
@pytest.mark.points(1)
def test_every_crash_state_of_generated_conversations(run_agent, crashcourse_seed, request):
    """Every guarantee, under all five crash models, on conversations of 0 to 12 turns."""
    rerun = rerun_command(request)

    examples = request.config._crashcourse_examples
    for scenario in generated(crashcourse_seed, examples):
        exploration = explore_loop(run_agent, scenario, models=POWER_CUT, timeout=STUDENT_TIMEOUT,
                                   directory=ABSOLUTE_FOLDER, before=parent_exists)
        assert_holds(exploration, ["PARSE", "WHOLE", "ATOMIC-DIR", "TRACE", "PAIRING", "FRESH", "COUNTS",
                                   "DURABLE"], rerun)
