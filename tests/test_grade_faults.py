"""Level 3's platform checks under ``crashcourse grade``: the kernel makes the fault, the judge decides.

- strace lines of a fault worker are kept call by call, failed ones too, counted per thread and
  per name as strace's ``inject=...:when=N`` counts them;
- the plan of which calls to fail (:func:`grader.grading.faults.plan`) fails those and no other,
  in any thread, or says it cannot;
- a real strace run fails exactly the N-th fsync of a thread;
- through a real box, the task-4 checks give the corpus the very verdicts and words they give in a
  learner's own pytest run;
- a submission that passes those checks in its own pytest run by spotting the patched ``os.fsync``
  (and forging a pytest run beside it) earns only what its code is worth under ``grade``;
- a check that still patches the judge's own process fails with that reason (nothing runs with
  pytest in a box any more).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.engine.loader import import_file
from grader.faces.plugin import Submission
from grader.grading import bubblewrap, faults, kernel_trace, stand_in
from grader.grading.box import Box
from grader.grading.faults import Fault
from grader.grading.kernel_trace import Call, KernelTrace

KIT = Path(__file__).resolve().parent.parent

CORPUS = KIT / "tests" / "corpus" / "level3"
HOSTILE = KIT / "tests" / "corpus" / "hostile" / "level3" / "fools_the_fault_checks.py"
THREADED = KIT / "tests" / "corpus" / "hostile" / "level3" / "folder_fsync_in_a_thread.py"
CHECKS = import_file(KIT / "exercises" / "level3" / "test_agent.py", "level3_checks_for_faults")


def needs_strace(test):
    """A test of the faults strace injects: marked `strace` (tests/conftest.py: SYSTEM_MARKERS), and
    skipped where strace cannot trace. The others here plan faults, or make them in the box, without it."""
    return pytest.mark.strace(pytest.mark.skipif(kernel_trace.problem() is not None,
                                                 reason=f"{kernel_trace.problem()}")(test))


def hx(text: str) -> str:
    return "".join(f"\\x{b:02x}" for b in text.encode())


# -- the trace, call by call ----------------------------------------------------------------------

def test_a_fault_workers_trace_keeps_every_call_with_its_count_and_error(tmp_path):
    trace = KernelTrace(str(tmp_path), keep_calls=True)
    trace.cwd, trace.pipe = "/box/work", "pipe:[9]"
    tmp, folder = "/box/work/ck/checkpoint.json.tmp", "/box/work/ck"
    for line in [
        f'7 write(5<{hx("pipe:[9]")}>, "{hx("ok")}", 2) = 2',
        f'7 openat(AT_FDCWD<{hx("/box/work")}>, "{hx("ck/checkpoint.json.tmp")}", O_WRONLY|O_CREAT|O_SYNC|O_CLOEXEC, '
        f'0666) = 3<{hx(tmp)}>',
        f'7 write(3<{hx(tmp)}>, "{hx("{}")}", 2) = -1 EIO (Input/output error) (INJECTED)',
        f'7 fsync(3<{hx(tmp)}>) = 0',
        f'8 fsync(4<{hx(folder)}>) = 0',
        f'7 fsync(4<{hx(folder)}>) = -1 EIO (Input/output error) (INJECTED)',
        f'7 openat(AT_FDCWD<{hx("/box/work")}>, "{hx("ck")}", O_RDONLY|O_CLOEXEC) = -1 EACCES (Permission denied) '
        '(INJECTED)',
        '7 sync() = 0',
    ]:
        trace._line(line)
    assert trace.tampered is None and trace.main_tid == "7"
    got = [(c.tid, c.name, c.ordinal, c.ret, c.errno, c.injected, c.path) for c in trace.calls]
    assert got == [("7", "write", 1, 2, None, False, "pipe:[9]"),
                   ("7", "openat", 1, 3, None, False, tmp),
                   ("7", "write", 2, -1, "EIO", True, tmp),
                   ("7", "fsync", 1, 0, None, False, tmp),
                   ("8", "fsync", 1, 0, None, False, folder),  # another thread counts on its own
                   ("7", "fsync", 2, -1, "EIO", True, folder),
                   ("7", "openat", 2, -1, "EACCES", True, folder),
                   ("7", "sync", 1, 0, None, False, "")]
    assert "O_SYNC" in trace.calls[2].flags  # the write knows how its file was opened
    assert trace.wire == 2  # the pipe write still counts as the judge's bytes
    assert faults.whole_syncs(trace.calls)
    trace.close()


# -- which calls to fail -----------------------------------------------------------------------------

def call(name, ordinal, path, tid="7", wire=100, flags="", injected=False, ret=None):
    ret = (-1 if injected else 3) if ret is None else ret
    return Call(tid, name, ordinal, wire, ret, "EIO" if injected or ret < 0 else None, injected, path, flags)


def folders(*paths):
    return lambda path: path in paths


def test_the_file_or_the_folder_fsync_is_chosen_by_its_path():
    calls = [call("fsync", 1, "/w/ck/t.tmp", wire=10), call("fsync", 2, "/w/ck", wire=10),  # the first save
             call("fsync", 3, "/w/ck/t.tmp"), call("fsync", 4, "/w/ck"), call("fsync", 5, "/w/ck")]
    after = faults.after_arming(calls, {"7"}, armed_at=50)
    is_dir = folders("/w/ck")
    assert faults.wanted(after, Fault(faults.FSYNC_OF_A_FILE, once=True), is_dir) == [("7", "fsync", 3)]
    assert faults.wanted(after, Fault(faults.FSYNC_OF_A_FOLDER), is_dir) == [("7", "fsync", 4), ("7", "fsync", 5)]
    assert faults.wanted(after, Fault(faults.FSYNC_OF_A_FOLDER, once=True), is_dir) == [("7", "fsync", 4)]


def test_a_listing_or_a_descriptor_relative_open_is_not_opening_a_folder():
    fault = Fault(faults.OPENING_A_FOLDER)
    is_dir = folders("/w", "/w/ck")
    calls = [call("openat", 5, "/w", flags="O_RDONLY|O_CLOEXEC"),
             call("openat", 6, "/w/ck/t.tmp", flags="O_WRONLY|O_CREAT"),
             call("openat", 7, "/w/ck", flags="O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_DIRECTORY"),  # os.listdir
             Call("7", "openat", 8, 100, 3, None, False, "/w/ck", "O_RDONLY", at_cwd=False),  # dir_fd=
             call("openat", 9, "/w/ck", flags="O_RDONLY|O_CLOEXEC")]
    assert faults.wanted(calls, fault, is_dir) == [("7", "openat", 5), ("7", "openat", 9)]


def want(*pairs, tid="7"):
    return [(tid, name, ordinal) for name, ordinal in pairs]


def test_a_plan_fails_the_wanted_calls_and_no_other():
    once, always = Fault(faults.FSYNC_OF_A_FILE, once=True), Fault(faults.FSYNC_OF_A_FILE)
    seen = [call("fsync", n, "/w/x") for n in range(1, 6)]
    assert faults.plan(seen, want(("fsync", 4)), once) == ["fsync:error=EIO:when=4"]
    # Every time, from the run without the fault: past the last call seen (a retry comes later) ...
    assert faults.plan(seen, want(("fsync", 4)), always, first=True) == ["fsync:error=EIO:when=4+"]
    # ... and, once a run showed the fault hitting call 5 it was not meant for, up to 4 only.
    assert faults.plan(seen, want(("fsync", 4)), always) == ["fsync:error=EIO:when=4"]
    assert faults.plan(seen, want(("fsync", 2), ("fsync", 3)), always) == ["fsync:error=EIO:when=2..3"]
    # Folders opened between files: a series with a step.
    opens = [call("openat", n, "/w") for n in range(300, 306)]
    folder = Fault(faults.OPENING_A_FOLDER)
    assert faults.plan(opens, want(("openat", 300), ("openat", 302), ("openat", 304)), folder) == \
        ["openat:error=EACCES:when=300..304+2"]
    # Not one series: no plan.
    assert faults.plan(opens, want(("openat", 300), ("openat", 301), ("openat", 303)), folder) is None
    # A write fault never reaches past the last write seen: the worker answers the judge by write.
    writes = [call("write", n, "/w/x") for n in range(206, 210)]
    assert faults.plan(writes, want(("write", 207)), always, first=True) == ["write:error=EIO:when=207"]
    # Two names, each with its own series.
    both = seen + [call("fdatasync", 1, "/w/x")]
    assert faults.plan(both, want(("fsync", 4), ("fdatasync", 1)), once) == \
        ["fdatasync:error=EIO:when=1", "fsync:error=EIO:when=4"]


def test_a_plan_leaves_the_other_threads_calls_alone():
    """strace's count runs per thread but its `when=` holds for all: bubblewrap's own processes too,
    and a thread of the code's own, whose first fsync has the count of the first save's."""
    seen = [call("write", n, "/proc/1/uid_map", tid="6") for n in range(1, 7)] + [call("write", 6, "/w/x")]
    once = Fault(faults.FSYNC_OF_A_FILE, once=True)
    assert faults.plan(seen, want(("write", 6)), once) is None
    padded = [call("write", n, "/proc/1/uid_map", tid="6") for n in range(1, 7)] + [call("write", 206, "/w/x")]
    assert faults.plan(padded, want(("write", 206)), once) == ["write:error=EIO:when=206"]
    threaded = [call("fsync", 1, "/w/x", wire=10), call("fsync", 1, "/w/ck", tid="9")]
    assert faults.plan(threaded, want(("fsync", 1), tid="9"), Fault(faults.FSYNC_OF_A_FOLDER)) is None
    assert faults.worker_threads([call("write", 1, "/x", tid=t) for t in ("5", "6", "7", "9")], "7") == {"7", "9"}


@needs_strace
def test_strace_fails_the_nth_fsync_of_a_thread_and_the_trace_says_so(tmp_path):
    code = ("import os\nfd = os.open('f', os.O_WRONLY | os.O_CREAT, 0o644)\nout = []\n"
            "for _ in range(3):\n    try:\n        os.fsync(fd); out.append('ok')\n"
            "    except OSError as e:\n        out.append(e.errno)\nprint(out)")
    trace = KernelTrace(str(tmp_path), keep_calls=True)
    command = trace.wrap([sys.executable, "-I", "-S", "-c", code], str(tmp_path), inject=["fsync:error=EIO:when=2"])
    done = subprocess.run(command, pass_fds=trace.pass_fds, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "['ok', 5, 'ok']", done.stderr
    trace._read()
    fsyncs = [(c.ordinal, c.errno, c.injected, c.path) for c in trace.calls if c.name == "fsync"]
    assert fsyncs == [(1, None, False, str(tmp_path / "f")), (2, "EIO", True, str(tmp_path / "f")),
                      (3, None, False, str(tmp_path / "f"))]
    trace.close()


# -- through a real box: the same verdicts and words as a learner's own run ------------------------------

def _local(agent: Path, tmp: Path) -> dict:
    submission = Submission(agent.parent)
    out = {"windows": CHECKS.problem_where_folders_cannot_be_opened(submission, _fresh(tmp / "here-win"))}
    for fault in CHECKS.FSYNC_FAULTS:
        out[fault] = CHECKS.problem_when_fsync_fails(submission, _fresh(tmp / f"here-{fault}"), fault)
    return out


def _fresh(folder: Path) -> Path:
    folder.mkdir(parents=True)
    return folder


@pytest.fixture
def boxed_submission(tmp_path):
    """``make(agent.py path)``: a stand-in for that file, its code in a box (or the bare sandbox) under strace."""
    made = []

    def make(agent: Path):
        root = tmp_path / f"box{len(made)}"
        (root / "sub").mkdir(parents=True)
        shutil.copy(agent, root / "sub" / "agent.py")
        box = Box(str(root / "sub"), str(root), f"faults-test-{os.getpid()}-{len(made)}", 60.0,
                  boxed=bubblewrap.check() is None)
        made.append(box)
        return stand_in.RemoteSubmission(Path(box.folder), box), Path(box.root)
    yield make
    for box in made:
        box.shutdown()


WHERE = re.compile(r" \[agent\.py, line \d+[^\]]*\]")  # the judge names the learner's line in a raised error


@needs_strace
@pytest.mark.parametrize("case", ["wrong_crashes_on_windows", "wrong_retries_fsync", "wrong_os_sync_cannot_report_errors",
                                  "wrong_fsync_after_rename", "right_o_sync_temp"])
def test_the_kernel_made_faults_give_the_verdicts_and_words_of_a_learners_own_run(case, tmp_path, boxed_submission):
    agent = CORPUS / case / "agent.py"
    here = _local(agent, tmp_path)
    submission, root = boxed_submission(agent)
    graded = {"windows": CHECKS.problem_where_folders_cannot_be_opened(submission, _fresh(root / "win"))}
    for fault in CHECKS.FSYNC_FAULTS:
        graded[fault] = CHECKS.problem_when_fsync_fails(submission, _fresh(root / fault.replace(", ", "-")), fault)
    graded = {k: WHERE.sub("", v) if v else v for k, v in graded.items()}
    assert graded == here
    assert any(here.values()) == case.startswith("wrong_")


def test_without_strace_the_fault_is_made_in_the_box_and_the_finding_says_so(tmp_path, boxed_submission):
    """Where strace cannot run, os is patched in the worker (as in a learner's own run): the same
    verdicts, and each finding says the fault was made where the code could undo it."""
    for case in ("wrong_retries_fsync", "right_o_sync_temp"):
        agent = CORPUS / case / "agent.py"
        here = _local(agent, tmp_path / case)
        submission, root = boxed_submission(agent)
        submission.box.kernel_problem = "strace is not installed"
        graded = {"windows": CHECKS.problem_where_folders_cannot_be_opened(submission, _fresh(root / "win"))}
        for fault in CHECKS.FSYNC_FAULTS:
            graded[fault] = CHECKS.problem_when_fsync_fails(submission, _fresh(root / fault.replace(", ", "-")), fault)
        note = "\n\n(No strace here (strace is not installed), so this check's fault was made by patching os"
        assert {k: v.split(note)[0] if v else v for k, v in graded.items()} == here
        assert all(note in v for v in graded.values() if v) and any(here.values()) == case.startswith("wrong_")


# -- a submission that fools the in-process checks ---------------------------------------------------------

@needs_strace
def test_spotting_the_patched_fsync_or_forging_pytest_earns_nothing_under_grade(tmp_path):
    folder = tmp_path / "subs" / "fools"
    folder.mkdir(parents=True)
    shutil.copy(HOSTILE, folder / "agent.py")
    # In a learner's own run the trick works: the fault checks find nothing wrong.
    assert _local(folder / "agent.py", tmp_path) == {k: None for k in ["windows", *CHECKS.FSYNC_FAULTS]}
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "grader", "grade", str(tmp_path / "subs"), "--level", "3",
                           "--examples", "1", "--output", str(report)]
                          + ([] if bubblewrap.check() is None else ["--no-box"]),
                          capture_output=True, text=True, cwd=KIT, timeout=300)
    assert report.exists(), done.stderr[-3000:]
    graded = json.loads(report.read_text())["submissions"][0]
    failed = {t["name"]: t["output"] for t in graded["tests"] if t["status"] != "passed"}
    assert list(failed) == ["test_a_failed_fsync_is_not_swallowed"], failed
    assert "fsync of the file it wrote reported an I/O error, yet save_checkpoint returned" in \
        failed["test_a_failed_fsync_is_not_swallowed"]
    assert graded["score"] == 9.0 and graded["max_score"] == 10.0


@needs_strace
def test_an_fsync_a_count_cannot_single_out_is_checked_another_way(tmp_path, boxed_submission):
    """Each save fsyncs its folder in a new thread, whose count starts at 1 like the first save's:
    no injection fails the second alone. The check falls back to the fault a learner's own run makes
    (os patched in the box, the kernel watching for calls around it), says so, and finds what the
    learner's own run finds: the folder's failed fsync is swallowed in that thread."""
    here = _local(THREADED, tmp_path)
    assert here["folder, always"] and here["folder, once"] and not here["file, always"]
    submission, root = boxed_submission(THREADED)
    for fault in ("folder, always", "folder, once", "file, always"):
        problem = CHECKS.problem_when_fsync_fails(submission, _fresh(root / fault.replace(", ", "-")), fault)
        if fault.startswith("file"):
            assert problem is None
            continue
        assert problem.startswith(here[fault]), (problem, here[fault])
        assert "by patching os in the box" in problem and "earns nothing" not in problem


@needs_strace
def test_a_call_that_goes_around_the_patched_fallback_makes_the_check_earn_nothing(tmp_path, boxed_submission):
    """Forcing the fallback (a new thread per fsync) and then calling the real fsync, bound before the
    patch, shows in the kernel's trace: a call the fault was for succeeded after it was armed."""
    agent = tmp_path / "around.py"
    agent.write_text(THREADED.read_text().replace("os.fsync(fd)", "_real_fsync(fd)").replace(
        "import warnings\n", "import warnings\n\n_real_fsync = os.fsync\n", 1))
    submission, root = boxed_submission(agent)
    problem = CHECKS.problem_when_fsync_fails(submission, _fresh(root / "folder-always"), "folder, always")
    assert problem is not None and "went around it: the kernel saw fsync of the folder" in problem
    assert "earns nothing" in problem


def test_only_a_call_that_every_fault_should_meet_went_around_the_patch():
    folder_sync = call("fsync", 3, "/w/ck", flags="O_RDONLY|O_DIRECTORY")
    file_sync = call("fsync", 4, "/w/ck/c.tmp")
    failed = call("fsync", 5, "/w/ck", flags="O_RDONLY|O_DIRECTORY", ret=-1)
    dirs = {"/w/ck"}.__contains__
    assert faults.slipped([file_sync, folder_sync, failed], Fault("fsync of a folder"), dirs) == ["fsync of the folder ck"]
    assert faults.slipped([file_sync, folder_sync], Fault("fsync of a folder", once=True), dirs) == [], "a retry"
    assert faults.slipped([folder_sync], Fault("fsync of a file"), dirs) == []


def test_a_check_that_patches_the_judges_own_process_fails_with_the_reason(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    shutil.copy(KIT / "solutions" / "level3" / "agent.py", tmp_path / "sub" / "agent.py")
    box = Box(str(tmp_path / "sub"), str(tmp_path), "faults-test-patch", 10.0)
    monkeypatch.setattr(stand_in, "_PRISTINE", {})
    stand_in.remember_pristine()
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    with pytest.raises(pytest.fail.Exception, match="changes os.fsync in the grading process"):
        stand_in.RemoteSubmission(Path(box.folder), box).load("agent.py")
    assert box.worker is None  # refused before any code ran
