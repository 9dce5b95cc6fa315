"""Round 6 of hostile submissions, graded by ``crashcourse grade`` as in tests/test_grade_hostile.py.

Each file in ``tests/corpus/hostile`` named below is either a wrong loop that changed checkpoint.json by a
route the grader had not yet met and then saved the honest way (so that the files agreed with the replay after
every call), an attempt to stop the batch, a way to tell a graded run from a learner's own, or a correct loop
written in an unusual way. What got through, and what closed it (grader/grading/kernel_trace.py):

- a descriptor number the trace still gave its old file: ``dup2`` from a descriptor it never saw opened (a memfd,
  open_tree's O_PATH) kept the number's old meaning, so ``/proc/self/fd/<n>/checkpoint.json`` read as /tmp (10
  before) and, on level 3, an fsync of a memfd dup2()ed over the temp file's and the folder's numbers was credited
  as both fsyncs (5 where its honest twin, a save with no fsync, earns 2). Now such a dup2 closes the number.
- the same through an exec, which closes every close-on-exec descriptor with no close call: the new program filled
  the number with open_tree or memfd_create (10, and 5 on level 3). Now an exec keeps only 0, 1 and 2.
- a relative name from a working folder in /proc (``chdir("/proc/self/fd")``), which the kernel resolves through
  the descriptors of the process that moved there, a forked child's ``"<n>/checkpoint.json"`` too (10). Refused.
- a folder above the box's own renamed aside: every file in the box's folder is named by another path meanwhile,
  and an in-place truncate through it went unseen (10). A rename of a folder at or above the box's folder is
  refused.
- pwritev2's RWF_APPEND from the position on a descriptor that does not append: the trace took it for an appending
  one from then on and no longer followed its lseek, so spaces written over the checkpoint at 0 looked like spaces
  after it (7, where an in-place save earns 6). Its position is now unknown until an lseek says where it is.
- reads, not traced, move the position a descriptor's next write lands at: a correct save that read its temp file
  back before writing a last newline was refused (0; its own pytest 10). read and readv are traced now, printed
  raw (the descriptor and a count, never the bytes).
- a descriptor strace prints bare (its path is longer than the kernel names whole): an O_TRUNC open of a second
  name of the checkpoint there was named "", and any other call on such a descriptor read as tampering. Now its
  file is the one its path resolves to, or its table entry's.
- a call strace printed no result for (its task killed inside it) was dropped, though the kernel may have done
  it in part (a write) or whole: now taken as done.
- two folders traded with renameat2's RENAME_EXCHANGE were replayed as a move of the first
  (grader/engine/crash_models.py): a change made through the other name was left behind, and the run refused as
  a mismatch with the disk. Each folder's files now move under the other's name.
- a checkpoint Python's json.loads refuses with something other than JSONDecodeError (nested past the recursion
  limit, an integer past int()'s digit limit): a traceback from the judge in place of a finding (0, as an error).
  It is now a file no resume could read.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.faces import plugin
from grader.grading import bubblewrap, kernel_trace

from test_grade_hostile import _own_pytest, kit_hashes

KIT = Path(__file__).resolve().parent.parent
CORPUS = KIT / "tests" / "corpus" / "hostile"

pytestmark = [pytest.mark.strace, pytest.mark.bubblewrap,
              pytest.mark.skipif(kernel_trace.problem() is not None or bubblewrap.check() is not None,
                                 reason="needs strace and a bubblewrap box")]

# id -> (status, score out of 10, words the reason must contain), and what each earned before its round.
EXPECTED = {
    "good": ("passed", 10.0, None),
    # Got through (the score before in the comment): each now earns what its code earns, or is refused with why.
    "truncates_through_a_dup2_of_an_open_tree": ("failed", 0.0, "/proc/self/fd/"),  # 10
    "truncates_through_open_tree_after_exec": ("failed", 0.0, "/proc/self/fd/50/checkpoint.json"),  # 10
    "truncates_through_a_parents_fd_folder": ("failed", 0.0, "moved into /proc/self/fd with chdir"),  # 10
    # The folder above the box's own (on the box's private /tmp, where the box's folder is bound at its path
    # outside) renamed aside for a moment, the checkpoint emptied through the other name, the folder put back: the
    # kernel's account named the truncate by a path no watched folder holds (10). Refused, with why.
    "truncates_while_the_boxs_folder_is_moved": ("failed", 0.0, "a folder above the folder the grader gave it"),
    "overwrites_after_an_rwf_append_and_a_seek": ("failed", 6.0, "PARSE"),  # 7
    # The spaces written through a descriptor kept open across an exec (not close-on-exec): where they land is
    # the position of a descriptor the trace no longer follows after the exec, refused (6 before, in place).
    "overwrites_through_a_descriptor_kept_across_exec": ("failed", 0.0, "kept open across an exec"),
    # Checkpoints json.loads cannot read (a RecursionError, a ValueError past the digit limit): 0 as an error, with
    # the judge's traceback, before. Now a file a resume could not read (PARSE) whose save is otherwise atomic.
    "saves_a_deeply_nested_checkpoint": ("failed", 5.0, "json.loads raises RecursionError"),
    "saves_an_integer_past_the_digit_limit": ("failed", 5.0, "json.loads raises ValueError: Exceeds the limit"),
    # Held (blocked before and after): routes the trace already followed or refused.
    "overwrites_through_dup3_over_the_temp_number": ("failed", 6.0, "PARSE"),
    "overwrites_through_fcntl_dupfd": ("failed", 6.0, "PARSE"),
    "truncates_through_dev_stdin": ("failed", 6.0, "PARSE"),
    "truncates_with_a_spawned_program": ("failed", 6.0, "PARSE"),
    "truncates_through_an_inside_hard_link": ("failed", 6.0, "PARSE"),
    "writes_through_a_link_to_the_temp_file": ("failed", 6.0, "PARSE"),
    "truncates_through_proc_self_task_cwd": ("failed", 0.0, "through a link in /proc into another process"),
    # A thread that never makes a traced call keeps every later child's fork a guess (README's known limit):
    # here the guess is right, as the child starts with what every candidate fork would give it.
    "truncates_from_a_child_while_a_thread_sleeps": ("failed", 6.0, "PARSE"),
    "truncates_by_a_bare_name_while_a_thread_sleeps": ("failed", 6.0, "PARSE"),
    # ... forked with the raw system call, so no at-fork handler makes a call before the child's truncate.
    "truncates_from_a_raw_fork_while_a_thread_sleeps": ("failed", 6.0, "PARSE"),
    "truncates_by_a_bare_name_from_a_raw_fork_while_a_thread_sleeps": ("failed", 6.0, "PARSE"),
    # The checkpoint folder traded with an empty one (RENAME_EXCHANGE), the checkpoint emptied through the other
    # name, traded back: a kill meanwhile finds no checkpoint, or an empty one (3, as truncates_while_its_folder_
    # is_renamed). Refused before as a mismatch with the disk (0): the replay took a trade of two folders for a
    # move of the first, so the emptied file stayed under the other name. Its honest twin trades in a whole new
    # folder each save (10, before and after).
    "truncates_after_exchanging_folders": ("failed", 3.0, "PARSE"),
    "saves_by_exchanging_folders": ("passed", 10.0, None),
    # A child made with clone(CLONE_UNTRACED), out of the tracer's reach: every traced call it makes fails
    # (ENOSYS, strace's seccomp filter with no tracer), so its truncate never happens and the honest save is all
    # there is.
    "hides_a_truncate_in_an_untraced_clone": ("passed", 10.0, None),
    # Stopping the batch: a lone surrogate and terminal escapes in the checkpoint a failure quotes, a returned
    # state nested 100,000 deep. The batch goes on, each earns what its code earns.
    "saves_a_lone_surrogate_in_its_task": ("failed", 5.0, "PARSE"),
    "returns_a_deeply_nested_state": ("passed", 10.0, None),
    # KNOWN GAPS (README, "What a box cannot hide"): a sign of the kernel trace itself, ptrace(PTRACE_TRACEME)
    # failing in a child, or traced calls taking tens of microseconds. Each saves well only there: 10 under
    # grade, 6 unwatched.
    "tells_grading_by_ptrace": ("passed", 10.0, None),
    "tells_grading_by_timing_traced_calls": ("passed", 10.0, None),
    # Correct, written unusually: the temp file written by a child program (its stdout), moved by mv, a save
    # made in a forked child while a thread sleeps, the checkpoint folder traded whole with RENAME_EXCHANGE.
    "saves_well_through_a_spawned_writer": ("passed", 10.0, None),
    "saves_well_with_mv": ("passed", 10.0, None),
    "saves_well_in_a_child_while_a_thread_sleeps": ("passed", 10.0, None),
    # ... and one that reads its temp file back (json.load from the start) before writing a last newline: reads
    # move the position the newline is written at, and were not traced; the replay put it at 0 and the run was
    # refused as changed by a route the trace does not see (0 before; its own pytest: 7, see FACES_AGREE).
    "saves_well_after_reading_back_its_temp_file": ("passed", 10.0, None),
    # A second name of the checkpoint at the bottom of folders whose path is longer than the kernel names whole,
    # opened with O_TRUNC through libc: strace printed the descriptor with no path, and the open was named "" (it
    # was refused only because another call of the run met the same bare descriptor and read as tampering, 0).
    # Now its file is the one its path resolves to: the in-place truncate it is (6).
    "truncates_through_a_link_too_deep_to_name": ("failed", 6.0, "PARSE"),
    # The same chain of folders beside a correct save: accused of tampering with the trace before (0); now the
    # crash states' layout refuses the long name, with why (1: its save is correct where nothing is laid out).
    "makes_a_deep_folder_tree": ("failed", 1.0, "at most 1024 are laid out"),
    # A shared writable map of a second name of the checkpoint, outside its folder but inside the box's: refused.
    "overwrites_through_a_shared_map_of_an_outside_link": ("failed", 0.0, "mapped"),
    # A child writing spaces over the checkpoint in place, killed by its parent while the write runs: the kernel
    # stops the write where it got to, and strace prints no result ("= ?"), which the trace dropped. (Here some of
    # its writes also end before the kill and are seen, so it earned 6 before too; by hand, a 2 MiB write cut short
    # showed as "= ?".) A call its task died inside is now taken as done: its crash states are those of an
    # in-place write.
    "overwrites_in_a_child_killed_mid_write": ("failed", 6.0, "PARSE"),
}
# A learner's own pytest gives these what grade gives (the score and the tests that did not pass). (The saves
# made by another program it cannot follow: 0 there, and it says so, as for writes_through_ctypes.)
FACES_AGREE = ("good", "saves_a_deeply_nested_checkpoint", "saves_an_integer_past_the_digit_limit")
# KNOWN GAP (the other way): saves_well_after_reading_back_its_temp_file earns 7 under its own pytest, where a
# second run after a crash finds checkpoint.json.tmp's stale bytes renamed into place in the recorder's replay
# (RERUN); the kernel's account, under grade, rebuilds what the disk holds and gives it 10.


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    folder = tmp_path_factory.mktemp("submissions6")
    for name in EXPECTED:
        (folder / name).mkdir()
        shutil.copy(CORPUS / f"{name}.py", folder / name / "agent.py")
    hashes = kit_hashes()
    temp = folder.parent / "grade-temp6"
    temp.mkdir()
    out = folder.parent / "report6.json"
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(folder), "--level", "2", "--jobs", "2",
                           "--timeout", "6", "--examples", "2", "--seed", str(plugin.DEFAULT_SEED),
                           "--output", str(out)], capture_output=True, text=True, timeout=300, cwd=KIT,
                          env=dict(os.environ, TMPDIR=str(temp), PYTHONDONTWRITEBYTECODE="1"))
    assert proc.returncode == 0, proc.stderr
    return {"report": json.loads(out.read_text()), "hashes": hashes, "raw": out.read_bytes()}


def _text(got: dict) -> str:
    return (got["error"] or "") + "\n".join(t["output"] for t in got["tests"])


@pytest.mark.parametrize("student", sorted(EXPECTED))
def test_each_submission_earns_what_its_code_earns(batch, student):
    status, score, words = EXPECTED[student]
    got = {s["id"]: s for s in batch["report"]["submissions"]}[student]
    assert (got["status"], got["score"]) == (status, score), _text(got)[:1500]
    if words:
        assert words in _text(got), _text(got)[:1500]


def test_no_judge_traceback_reaches_a_report(batch):
    """A checkpoint json.loads refuses in an unusual way is a finding, never the judge's own traceback."""
    for s in batch["report"]["submissions"]:
        assert "Traceback" not in _text(s) and "json/decoder.py" not in _text(s), (s["id"], _text(s)[:1500])


def test_the_report_holds_no_text_a_file_cannot(batch):
    """The surrogate and terminal escapes a checkpoint carried are made safe in the report."""
    batch["raw"].decode("utf-8")  # strict: a lone surrogate would not have been written
    text = _text({s["id"]: s for s in batch["report"]["submissions"]}["saves_a_lone_surrogate_in_its_task"])
    assert "\ud800" not in text and "\x1b" not in text


@pytest.mark.parametrize("student", FACES_AGREE)
def test_its_own_pytest_gives_what_grade_gives(batch, student, tmp_path):
    got = {s["id"]: s for s in batch["report"]["submissions"]}[student]
    graded = (got["score"], sorted(t["name"] for t in got["tests"] if t["status"] != "passed"))
    score, failing, text = _own_pytest(CORPUS / f"{student}.py", tmp_path)
    assert (score, failing) == graded, text[-3000:]


def test_the_kits_files_are_unchanged(batch):
    assert kit_hashes() == batch["hashes"]


# Level 3: fsyncs credited through a number the trace still gave the temp file and the folder, filled by a memfd
# (dup2 from it; an exec, then memfd_create): 5 before, where the honest twin, a save with no fsync at all
# (tests/corpus/level3/wrong_starter_no_fsync), earns 2. Now each earns what the twin earns.
LEVEL3 = {"fakes_fsyncs_with_a_memfd_under_their_numbers": (2.0, "DURABLE"),
          "fakes_fsyncs_after_an_exec": (2.0, "DURABLE"), "wrong_starter_no_fsync": (2.0, "DURABLE")}


@pytest.fixture(scope="module")
def batch3(tmp_path_factory):
    folder = tmp_path_factory.mktemp("submissions6l3")
    for name in LEVEL3:
        if (CORPUS / "level3" / f"{name}.py").exists():
            (folder / name).mkdir()
            shutil.copy(CORPUS / "level3" / f"{name}.py", folder / name / "agent.py")
        else:
            shutil.copytree(KIT / "tests" / "corpus" / "level3" / name, folder / name)
    out = folder.parent / "report6l3.json"
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(folder), "--level", "3", "--jobs", "2",
                           "--timeout", "10", "--examples", "2", "--output", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=KIT,
                          env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    assert proc.returncode == 0, proc.stderr
    return {s["id"]: s for s in json.loads(out.read_text())["submissions"]}


def test_fsyncs_faked_through_a_number_earn_what_no_fsync_earns(batch3):
    for name, (score, words) in LEVEL3.items():
        got = batch3[name]["score"]
        # (fakes_fsyncs_after_an_exec starts Python twice a save: on a busy machine a check may run out of time
        # too, and earn less than its twin, never more)
        assert (got <= score if name == "fakes_fsyncs_after_an_exec" else got == score) \
            and words in _text(batch3[name]), (name, _text(batch3[name])[:1500])
    for name in ("fakes_fsyncs_with_a_memfd_under_their_numbers", "fakes_fsyncs_after_an_exec"):
        failing = {t["name"] for t in batch3[name]["tests"] if t["status"] != "passed"}
        assert "test_the_data_is_on_disk_before_the_rename" in failing, (name, _text(batch3[name])[:1500])
