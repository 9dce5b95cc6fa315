"""Round 5 of hostile level-2 submissions, graded by ``crashcourse grade`` as in tests/test_grade_hostile.py.

Each file in ``tests/corpus/hostile`` named below is a wrong loop that changed checkpoint.json by a route
the grader once missed, then saved the honest way so that the files agreed with the replay after every
call. Each earned 10 before its route was followed (or refused); now each earns what its code earns, and,
where a learner's own pytest can follow it too, the same there (FACES_AGREE):

- a path through /proc's links into the process itself: ``/proc/self/root/...``, ``/proc/self/fd/<folder>/...``,
  ``/dev/fd/<folder>/...``, ``/proc/thread-self/cwd/...`` (a truncate, or a move aside and back), a chdir
  into ``/proc/self/fd/<folder>``. The kernel follows each to the checkpoint; the trace named a file
  in /proc that no crash state holds. Through ``/proc/<pid>/``, where the box's pid cannot be mapped,
  the run is refused.
- the bytes of an in-kernel copy given by the worker's words: ``sys.audit("shutil.copyfile", ck, ck)``
  before copying spaces over the checkpoint from a memfd. The words said the file kept its own bytes.
- a descriptor number the trace's table still gave to the temp file after a close it did not follow
  (close_range, an exec), filled by the checkpoint's descriptor received over a socket; and one taken with
  pidfd_getfd, whose writes the trace placed at the file's end.
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

from grader.faces import plugin
from grader.grading import bubblewrap, kernel_trace

from test_grade_hostile import _own_pytest, kit_hashes

KIT = Path(__file__).resolve().parent.parent
CORPUS = KIT / "tests" / "corpus" / "hostile"

pytestmark = [pytest.mark.strace, pytest.mark.bubblewrap,
              pytest.mark.skipif(kernel_trace.problem() is not None or bubblewrap.check() is not None,
                                 reason="needs strace and a bubblewrap box")]

# id -> (status, score out of 10, words the reason must contain). What each earned before: 10.
EXPECTED = {
    "good": ("passed", 10.0, None),
    # An in-place truncate, a crash point: what any in-place save earns (truncates_after_a_childs_chdir's 6).
    "truncates_through_proc_root": ("failed", 6.0, "after os.truncate of"),
    "truncates_through_proc_fd": ("failed", 6.0, "after os.truncate of"),
    "truncates_through_dev_fd": ("failed", 6.0, "after os.truncate of"),
    "truncates_after_chdir_through_proc": ("failed", 6.0, "after os.truncate of"),
    # The checkpoint moved aside before the new one is in place: a kill between leaves none (w27's 6, TRACE).
    "moves_aside_through_proc_cwd": ("failed", 6.0, "TRACE"),
    # Through its own pid, as the box numbers it: the trace cannot tell whose folder that is, so it refuses.
    "truncates_through_proc_pid_cwd": ("failed", 0.0, "through a link in /proc into another process"),
    # Spaces copied over the checkpoint from a memfd: bytes no account holds, refused in the folder.
    "forges_the_bytes_of_a_sendfile": ("failed", 0.0, "with os.sendfile, which copies them inside the kernel"),
    # Spaces written over the checkpoint through a descriptor number the trace still took for the temp file's
    # (closed by close_range, or by an exec, then filled by one received over a socket): 10 and 7 before.
    "reuses_a_descriptor_closed_unseen": ("failed", 6.0, "PARSE"),
    "reuses_a_descriptor_closed_by_exec": ("failed", 6.0, "PARSE"),
    # ... through one taken with pidfd_getfd (7 before: a write the trace put at the end, where spaces are
    # harmless): where it lands is unknown, refused.
    "writes_through_pidfd_getfd": ("failed", 0.0, "through a descriptor the grader never saw opened"),
    # ... through an O_APPEND descriptor with O_APPEND turned off before its first write (fcntl F_SETFL), so they
    # land at 0, where the replay kept appending them (7 before, here and under its own pytest, which still
    # gives 7: the recorder does not follow fcntl). Refused, with why.
    "overwrites_after_turning_append_off": ("failed", 0.0, "turned O_APPEND off (fcntl F_SETFL)"),
    # ... and for one write, pwritev2's RWF_NOAPPEND (Linux 6.9): 7 before.
    "overwrites_by_rwf_noappend": ("failed", 0.0, "wrote with pwritev2 and RWF_NOAPPEND"),
    # Routes the trace already followed, held: the checkpoint's folder (or the folder above it) renamed aside
    # while the checkpoint is emptied through its new name (a kill meanwhile finds no checkpoint, or an empty
    # one: 3); a hard link outside the folder written through (6); a correct save whose temp file's name holds
    # a newline and a forged strace line, quotes, '<', '>', ' = 0' and bytes that are not UTF-8 (10).
    "truncates_while_its_parent_is_renamed": ("failed", 3.0, "PARSE"),
    "truncates_while_its_folder_is_renamed": ("failed", 3.0, "PARSE"),
    # The same truncate by a bare name from inside the folder renamed aside, an empty one in its place: the trace
    # kept the working folder's old name and looked in the empty one (6 before, no PARSE broken; its own pytest 3).
    "truncates_from_a_moved_working_folder": ("failed", 3.0, "PARSE"),
    "truncates_through_a_hard_link_outside": ("failed", 6.0, "PARSE"),
    "saves_well_through_an_odd_temp_name": ("passed", 10.0, None),
    # A correct save into an O_TMPFILE file named with linkat(fd, "", ..., AT_EMPTY_PATH) (through ctypes: its
    # own pytest cannot follow it, and says so): 0 before, the trace named the link's source `#inode`.
    "saves_well_through_flink": ("passed", 10.0, None),
}
# A learner's own pytest follows these too (the recorder names a path through /proc by where it leads).
# (The exec'd program's write it cannot follow: 0 there, and it says so; pidfd_getfd it follows, as an in-place
# write: 6 there, where grade refuses.)
FACES_AGREE = ("truncates_through_proc_root", "truncates_through_proc_fd", "truncates_through_dev_fd",
               "truncates_after_chdir_through_proc", "moves_aside_through_proc_cwd", "forges_the_bytes_of_a_sendfile",
               "reuses_a_descriptor_closed_unseen", "truncates_from_a_moved_working_folder")


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    folder = tmp_path_factory.mktemp("submissions5")
    for name in EXPECTED:
        (folder / name).mkdir()
        shutil.copy(CORPUS / f"{name}.py", folder / name / "agent.py")
    hashes = kit_hashes()
    temp = folder.parent / "grade-temp5"
    temp.mkdir()
    out = folder.parent / "report5.json"
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(folder), "--level", "2", "--jobs", "2",
                           "--timeout", "6", "--examples", "2", "--seed", str(plugin.DEFAULT_SEED),
                           "--output", str(out)], capture_output=True, text=True, timeout=240, cwd=KIT,
                          env=dict(os.environ, TMPDIR=str(temp), PYTHONDONTWRITEBYTECODE="1"))
    assert proc.returncode == 0, proc.stderr
    return {"report": json.loads(out.read_text()), "hashes": hashes}


def _text(got: dict) -> str:
    return (got["error"] or "") + "\n".join(t["output"] for t in got["tests"])


@pytest.mark.parametrize("student", sorted(EXPECTED))
def test_each_submission_earns_what_its_code_earns(batch, student):
    status, score, words = EXPECTED[student]
    got = {s["id"]: s for s in batch["report"]["submissions"]}[student]
    assert (got["status"], got["score"]) == (status, score), _text(got)[:1500]
    if words:
        assert words in _text(got), _text(got)[:1500]


@pytest.mark.parametrize("student", FACES_AGREE)
def test_its_own_pytest_gives_what_grade_gives(batch, student, tmp_path):
    got = {s["id"]: s for s in batch["report"]["submissions"]}[student]
    graded = (got["score"], sorted(t["name"] for t in got["tests"] if t["status"] != "passed"))
    score, failing, text = _own_pytest(CORPUS / f"{student}.py", tmp_path)
    assert (score, failing) == graded, text[-3000:]


def test_the_kits_files_are_unchanged(batch):
    assert kit_hashes() == batch["hashes"]


# Level 3: a folder fsync faked by fsyncing a regular file opened at the folder's name while the folder was
# renamed aside (made through ctypes, with no word of the worker's). Whether that name is a folder was looked
# up on the disk when the judge read the trace, by which time the folder was back: the fake was credited (89
# crash states of 355 broke DURABLE where its honest twin, wrong_file_fsync_only, breaks 255 of 407). Now a name
# the trace saw made a file is a file: 361 of 695. The window with the folder aside costs more than the fake
# ever gained: 1 of 10 before and after (the twin: 6).
LEVEL3 = {"fakes_a_folder_fsync": (1.0, "DURABLE"), "wrong_file_fsync_only": (6.0, "DURABLE")}


@pytest.fixture(scope="module")
def batch3(tmp_path_factory):
    folder = tmp_path_factory.mktemp("submissions5l3")
    (folder / "fakes_a_folder_fsync").mkdir()
    shutil.copy(CORPUS / "level3" / "fakes_a_folder_fsync.py", folder / "fakes_a_folder_fsync" / "agent.py")
    shutil.copytree(KIT / "tests" / "corpus" / "level3" / "wrong_file_fsync_only", folder / "wrong_file_fsync_only")
    out = folder.parent / "report5l3.json"
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(folder), "--level", "3", "--jobs", "2",
                           "--timeout", "10", "--examples", "2", "--output", str(out)],
                          capture_output=True, text=True, timeout=240, cwd=KIT,
                          env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    assert proc.returncode == 0, proc.stderr
    return {s["id"]: s for s in json.loads(out.read_text())["submissions"]}


def test_a_faked_folder_fsync_earns_no_more_than_its_honest_twin(batch3):
    for name, (score, words) in LEVEL3.items():
        assert batch3[name]["score"] == score and words in _text(batch3[name]), (name, _text(batch3[name])[:1500])
    fake = next(t for t in batch3["fakes_a_folder_fsync"]["tests"] if t["name"] == "test_a_save_that_returned_is_never_undone")
    broke, of = map(int, re.search(r"(\d+) of (\d+) crash states under M4 and M5 break DURABLE", fake["output"]).groups())
    # The fake credits nothing: some half break (301 of 603 since writes made back to back are one operation, 361
    # of 695 before), where the credited fake broke a quarter (89 of 355).
    assert broke * 5 > of * 2, fake["output"][:1500]
