"""``crashcourse grade`` on a folder of hostile level-2 submissions, run as an instructor would.

One batch (``--jobs 2``, short timeouts, two generated conversations per property test) grades
every file in ``tests/corpus/hostile`` plus the level's starter and a few folders that are odd in
themselves (a name with ``|`` and a newline, only ``x/x``, a zip that is not one, a zip bomb, a
link in place of agent.py, an unreadable file). The test then reads the report and checks each
submission's status, score and reason, and that nothing was left behind: no process of the batch
still alive, no file written outside its temporary folder, the submissions folder and the kit's
own files (``grader/`` and ``exercises/``, ``__pycache__`` included) unchanged.

Each attack in the corpus raises ``ESCAPED: ...`` at import when it works; blocked, the file is
the working loop and earns full marks. So "passed, 10" below means "the attack was blocked".
Batches run in a bubblewrap box (:mod:`grader.grading.bubblewrap`); where none starts, these tests skip
and :func:`test_grade_refuses_without_a_box` shows what the instructor is told instead.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader.faces import plugin
from grader.grading import bubblewrap
from grader.grading import kernel_trace
from grader.grading import reports
from grader.grading import sandbox

KIT = Path(__file__).resolve().parent.parent

# The tests that grade the batch in bubblewrap boxes (or start boxes as root) are marked `bubblewrap`
# (tests/conftest.py: SYSTEM_MARKERS); the rest run without a box.
CORPUS = KIT / "tests" / "corpus" / "hostile"
ESCAPES = [Path("/tmp/crashcourse-escaped.txt"), KIT / "escaped.txt"]

# id -> (status, score out of 10, words the reason must contain)
EXPECTED = {
    "good": ("passed", 10.0, None),
    "starter": ("failed", 3.0, "PARSE"),
    "syntax_error": ("error", 0.0, "syntax error on line 4"),
    "raises_at_import": ("error", 0.0, "raised RuntimeError: configuration file not found"),
    # A hang is told from the learner's frames in the box, as pytest tells it: function, file and line.
    "hangs_at_import": ("error", 0.0, "Importing agent.py got stuck: it was still running after 5 s, so it was "
                                      "stopped.\n  Where it was: agent.py, line 5, in <module>"),
    "hangs_in_save": ("failed", 0.0, "save_checkpoint got stuck at agent.py, line 16, in save_checkpoint and was "
                                     "stopped after 5 s"),
    "exits_at_import": ("error", 0.0, "called sys.exit(0)"),
    "os_exit_mid_run": ("error", 0.0, "ended while running run_agent (exit status 0)"),
    "prints_megabytes": ("passed", 10.0, None),
    "allocates_6gib": ("failed", 0.0, "MemoryError"),
    "writes_outside": ("failed", 3.0, "PARSE"),
    "fake_results": ("failed", 3.0, "PARSE"),
    "patches_pytest": ("failed", 3.0, "PARSE"),
    "detached_child": ("passed", 10.0, None),
    "nondaemon_thread": ("passed", 10.0, None),
    "reads_environment": ("passed", 10.0, None),
    # The kernel saw its in-place writes, which are crash points whether or not the recorder saw them:
    # it earns what the same save earns unsilenced (6 of 10, under its own pytest too).
    "silences_recorder": ("failed", 6.0, "PARSE"),
    "forges_recorded_ops": ("failed", 0.0, "the recorded file operations do not match what the kernel saw"),
    # Its recorded bytes are forged past the first few hundred (same length, same operations): the
    # crash states are built from the kernel's bytes, so it earns what its lagging count earns.
    "forges_written_bytes": ("failed", 8.0, "break COUNTS"),
    # In a box its parent is bwrap's, in another pid namespace: strace is out of its reach, so the kill
    # misses the tracer. But a second run after a crash imports the file afresh, as a child of the
    # grader's fork server, and there the kill lands on that server: the second run is lost and told
    # as such (RERUN), and nothing else. (With --no-box the kill lands on the tracer: an error, 0/10.)
    "kills_its_tracer": ("failed", 7.0, "your code killed the process that started it"),
    "empty": ("error", 0.0, "has no function `run_agent`"),
    "missing_function": ("error", 0.0, "has no function `run_agent`"),
    # attacks on the box, the other students and the grader: each blocked, so the loop earns 10
    "kills_neighbours": ("passed", 10.0, None),
    "writes_other_box": ("passed", 10.0, None),
    "reads_other_students": ("passed", 10.0, None),
    "kills_grade": ("passed", 10.0, None),
    "leaves_sleeper": ("passed", 10.0, None),
    "connects_localhost": ("passed", 10.0, None),
    "writes_proc_sys": ("passed", 10.0, None),
    "fork_bomb": ("passed", 10.0, None),
    "reads_kit": ("passed", 10.0, None),
    "reads_grade_argv": ("passed", 10.0, None),
    "answers_symlink": ("passed", 10.0, None),
    "writes_kit": ("passed", 10.0, None),
    # Tells of a temp file named <folder>/../../../tmp/... that it never wrote: the kernel's account
    # refuses the forged write. (Without a kernel trace the layout of its crash states refuses it:
    # see below.) Either way nothing is written outside the folder.
    "lays_out_outside": ("failed", 0.0, "which the kernel never saw"),
    # Sends a reply whose JSON points at its 4 MiB of bytes 600 times: refused before any copy is made.
    "amplifies_reply": ("error", 0.0, "could not read"),
    # Sparse files of 60 MiB, free for the box, that a judge rebuilding them would hold: refused as broken.
    "inflates_replay": ("error", 0.0, "a broken run: rebuilding what your code did to files"),
    # Tells the recorder of a truncate to 1 GiB, a write of "60 MiB" carrying 3 bytes, an offset of 1 GiB.
    "tells_huge_sizes": ("error", 0.0, "could not read"),
    # 40 MiB of JSON empty lists, some 800 MB once decoded: weighed and refused before decoding.
    "amplifies_json": ("error", 0.0, "could not read"),
    # 100 MiB to /dev/null: the trace, capped like any file of the box, stops the run, and says why.
    "floods_the_trace": ("error", 0.0, "your code wrote more than 64 MiB in all"),
    # Looks for a sign that this run is a graded one (a variable, the hostname, a folder's name).
    "tells_grading": ("passed", 10.0, None),
    # An exception with a lone surrogate and terminal escapes: shown made safe, and the batch goes on.
    "surrogate_message": ("failed", 0.0, "disk full \ufffd? [2J[31mcleared your screen"),
    # Writes in place by routes a patch in Python does not see (libc's write() through ctypes; a forked
    # child): the kernel saw the writes, so they are crash points, and the in-place save earns what it
    # earns. A learner's own pytest follows the forked child too (the same 6, see FACES_AGREE below);
    # ctypes it cannot follow, so it scores 0 and says why, and that grade judges from the kernel.
    "writes_through_ctypes": ("failed", 6.0, "PARSE"),
    "saves_in_a_forked_child": ("failed", 6.0, "PARSE"),
    # A link to /tmp in its folder, written through: the box makes no link, nothing is laid out through one.
    "symlinks_out_of_its_folder": ("passed", 10.0, None),
    # Save correctly only while something in their process looks patched (w43: `os.replace is not
    # posix.replace`; or any other sign of an in-process recorder): the box patches nothing under a
    # kernel trace, so they earn what their unwatched in-place save earns. (Their own pytest watches by
    # patching, and gives them 10: README, "Why a submission cannot grade itself".)
    "saves_well_only_when_watched": ("failed", 6.0, "PARSE"),
    "saves_well_on_any_sign_of_a_recorder": ("failed", 6.0, "PARSE"),
    # Saves well only while sys.dont_write_bytecode is set: neither the box nor the recorder sets it (a
    # usual run leaves it unset, and byte-code caches are left out of both accounts), so it earns what
    # its in-place save earns, here and under its own pytest (test_its_own_pytest_gives_what_grade_gives).
    "saves_well_without_bytecode": ("failed", 6.0, "PARSE"),
    # Saves well only where a test's variable is set but not what pytest has set by then (faulthandler,
    # the kit's gc threshold, pytest's thread hooks): the box sets them as pytest does, so 6 in both faces.
    "saves_well_where_pytest_settings_are_missing": ("failed", 6.0, "PARSE"),
    # KNOWN GAPS, held at today's verdict so a change shows (README, "Why a submission cannot grade
    # itself"); each earns 10 here, and unwatched its save is in place (6). The code runs in the
    # grader's worker, whose modules it can see (as under its own pytest, whose tests import the grader).
    "saves_well_while_the_grader_is_loaded": ("passed", 10.0, None),
    # ... and not in pytest: a test's variable is set, pytest is not loaded (loading it would make each
    # worker's start about three times as long). Its own pytest gives 6 (test_a_known_gap_...).
    "saves_well_where_pytest_is_not_loaded": ("passed", 10.0, None),
    # ... and the code's callers are the worker's frames, its module in sys.modules.
    "saves_well_when_the_worker_calls_it": ("passed", 10.0, None),
    # What the box is made of: a seccomp filter with no_new_privs (bubblewrap's, and strace
    # --seccomp-bpf for the kernel trace), capped CPU time and address space (its isolation), a worker
    # started with `python -c` (sys.orig_argv, /proc/self/cmdline), a pid namespace (pid 2, the fresh
    # processes it forks next).
    "saves_well_under_a_seccomp_filter": ("passed", 10.0, None),
    "saves_well_under_tight_limits": ("passed", 10.0, None),
    "saves_well_when_started_by_c": ("passed", 10.0, None),
    "saves_well_with_a_low_pid": ("passed", 10.0, None),
    # Its mounts (a read-only tmpfs root) and a cgroup namespace of its own (every line names the root).
    "saves_well_on_a_read_only_root": ("passed", 10.0, None),
    "saves_well_in_a_cgroup_of_its_own": ("passed", 10.0, None),
    # A 40 MB exception message: cut to a size a report holds, and the batch goes on.
    "raises_a_huge_message": ("failed", 0.0, "RuntimeError: disk on fire xxx"),
    # Wrong saves that change checkpoint.json in place by a route the trace did not follow, then save the
    # honest way so that the files agree with the replay after every call: each earned 10 before its route
    # was refused or followed. Calls the crash states cannot be rebuilt from fail as a kernel or file system
    # without them fails them (openat2, native AIO, fallocate: kernel_trace.ALSO_REFUSED, and the box's
    # seccomp filter), and the loop stops on that error; bytes spliced into the folder from a pipe (which no
    # account holds) and a shared map of a file open for writing (mprotect makes it writable unseen) are
    # refused, with why; sendfile and copy_file_range from a file the trace saw written take its bytes,
    # so their torn crash states are seen (5); a child's chdir no longer moves the parent's relative
    # paths, so the truncate is a crash point (6 of 10, as any in-place save).
    "truncates_through_openat2": ("failed", 0.0, "openat2: Function not implemented"),
    "overwrites_by_native_aio": ("failed", 0.0, "io_setup: Function not implemented"),
    "punches_holes": ("failed", 0.0, "fallocate: Operation not supported"),
    "overwrites_by_splice": ("failed", 0.0, "with splice, which copies them inside the kernel"),
    "overwrites_by_sendfile": ("failed", 5.0, "after sendfile of 64 bytes"),
    "overwrites_by_copy_file_range": ("failed", 5.0, "after copy_file_range of 64 bytes"),
    "overwrites_through_mprotect": ("failed", 0.0, "shared from a descriptor open for writing"),
    "truncates_after_a_childs_chdir": ("failed", 6.0, "after os.truncate of"),
    # Writes the kernel appends after the old save while the replay put them at offset 0 (O_APPEND turned
    # on with fcntl F_SETFL; pwritev2's RWF_APPEND): the replay's old-save-replaced states were whole where
    # the disk held two saves run together (5 before, from torn-write states alone); now appended in the
    # replay too, they earn what an in-place save earns.
    "appends_after_f_setfl": ("failed", 6.0, "PARSE"),
    "appends_by_rwf_append": ("failed", 6.0, "PARSE"),
    # A seccomp filter of its own whose SECCOMP_RET_USER_NOTIF (ranked above the tracer's RET_TRACE) hands
    # ftruncate to a thread that lets it run: a truncate in place the tracer never saw (9 of 10 before, the
    # one failure its own EBUSY). seccomp() fails in the box now, as on a kernel without it.
    "hides_calls_with_its_own_seccomp_filter": ("failed", 0.0, "[Errno 38] seccomp"),
    # The same truncate from a second child, made before the tracer printed its fork, while the first child
    # sits in /. In a box a clone returns the child's id in the box's pid namespace, which names no task of
    # the trace; the child is tied to its parent as the only clone started whose child had not shown
    # (kernel_trace._CLONES), so the truncate lands on checkpoint.json (6, 7, 9 or 10 when its folder was
    # guessed, with strace's print order, save by save).
    "truncates_from_a_second_child": ("failed", 6.0, "after os.truncate of"),
    # More of its kind, each tied the same way (10 before, their folder guessed from the first child's /): a
    # grandchild forked by a child that moved into the checkpoint folder truncates the bare name; a thread
    # of a second child truncates the relative path (a thread shares its process's folder).
    "truncates_from_a_grandchild_after_a_chdir": ("failed", 6.0, "after os.truncate of"),
    "truncates_from_a_thread_in_a_child": ("failed", 6.0, "after os.truncate of"),
    # Routes the trace already followed: a descriptor handed over a Unix socket (its in-place writes are
    # crash points: 6), renameat2's RENAME_NOREPLACE after removing the checkpoint (a kill between leaves
    # none: what w27 earns), RENAME_EXCHANGE (correct: the two names trade files in one step, and the
    # replay swaps them), sockets bound in its folder (names no call of the trace made; the judge's walk of
    # the folder stays cheap), a disk filled by sendfile outside the folder (held by the box's folder's
    # size), a hunt for secrets (nothing found), a forged frame on its pipes (its own run breaks).
    "writes_through_a_passed_descriptor": ("failed", 6.0, "PARSE"),
    "removes_then_renames_noreplace": ("failed", 6.0, "TRACE"),
    "exchanges_into_place": ("passed", 10.0, None),
    "binds_sockets_in_its_folder": ("passed", 10.0, None),
    "allocates_its_disk": ("passed", 10.0, None),
    "hunts_secrets": ("passed", 10.0, None),
    "writes_junk_to_the_judges_pipe": ("error", 0.0, "the process running your code sent the grader"),
}
# Verdicts that hold only where the kernel trace is taken (without strace the recorder alone is believed).
TRACED = ("overwrites_by_splice", "overwrites_by_sendfile", "overwrites_by_copy_file_range",
          "overwrites_through_mprotect", "truncates_after_a_childs_chdir", "truncates_from_a_second_child",
          "truncates_from_a_grandchild_after_a_chdir", "truncates_from_a_thread_in_a_child",
          "writes_through_a_passed_descriptor", "appends_after_f_setfl", "appends_by_rwf_append",
          "exchanges_into_place")
# floods_the_trace races a cap on size against a limit on time: unloaded, its 100 MiB cost the tracer
# and the box about 1 s of CPU before the trace reaches its cap, well within the 5 s one call of the
# learner's code may take (a wall-clock limit: it must stop a sleep that costs no CPU). On a machine
# busy enough to leave the box a fifth of a core, the limit on time comes first. Either way the run
# earns nothing and the judge held no more than the cap; it is never told it killed its tracer.
OUTRUN = {"floods_the_trace": ("failed", 0.0, "run_agent got stuck: it was still running after 5 s")}
# Folders that are odd in themselves, not in their code: id -> (status, words the reason must contain)
ODD = {
    "only_x_x": ("error", "There is no agent.py"),
    "evil|name\n| forged | 10 of 10 |": ("failed", None),
    "not_a_zip": ("error", "is not a zip file"),
    "zip_bomb": ("error", "unpacks to more than"),
    "linked_agent": ("error", "There is no agent.py"),
    "unreadable_extra": ("passed", None),
    "caf\u00e9 \u2603": ("failed", None),
}


def _process_cap() -> bool:
    """Whether a box's processes are capped here: by RLIMIT_NPROC (an ordinary user, or root handing
    each box a uid of its own) or by a cgroup with pids.max (root and a writable /sys/fs/cgroup)."""
    if os.geteuid() != 0 or bubblewrap.own_uid_problem() is None:
        return True
    group = bubblewrap.Cgroup(f"probe-{os.getpid()}", bubblewrap.Limits())
    try:
        return "pids" in group.kinds
    finally:
        group.remove()


if not _process_cap():
    # Known limit (README): where user namespaces are off for other users, a box graded by root
    # runs as the host's uid 0, to which the kernel never applies RLIMIT_NPROC; without a cgroup
    # the fork bomb is then not held back (the box still ends it). The batch's notes say so.
    EXPECTED["fork_bomb"] = ("error", 0.0, "ESCAPED: started 400 processes")
if os.geteuid() != 0:
    # Known limit (README): graded as an ordinary user, a box's folder is on the disk, with only the cap on
    # one file, so copies made inside the kernel (no byte of them in the trace) can fill it.
    EXPECTED["allocates_its_disk"] = ("failed", 0.0, "ESCAPED: filled")
if kernel_trace.problem():
    # Where the judge would lay that crash state out (a second run after the crash), it refuses
    # (grader.engine.layout), and every test reading that run fails. The generated conversations are
    # judged in memory, never laid out, and the loop itself is correct: 1 point.
    EXPECTED["lays_out_outside"] = ("failed", 1.0, "climbs out of the folder")
SECRET = Path("/tmp/crashcourse-hostile-secret.txt")
SECRET_TEXT = "instructor-only: the hidden scenarios live in /srv/private"
PORT = 47653
# leaves_sleeper's process, under a name of this run's own: a run of these tests in another checkout
# (a helper's, CI's) may have its own sleeper alive in a box of its batch at the moment this one looks.
SLEEP_FOR = f"4242.{os.getpid()}"
SLEEPER = b"sleep\x00" + SLEEP_FOR.encode()


def _our_processes(temp: Path) -> list[int]:
    """Processes of this batch's boxes (their HOME is in its temp folder: other batches may be running)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    environ = f.read().split(b"\0")
            except OSError:
                continue
            home = next((v for v in environ if v.startswith(b"HOME=")), b"")
            if str(temp).encode() in home:
                found.append(int(entry))
    return found


def _grade_dirs(temp: Path) -> set:
    return {p.name for p in temp.glob("crashcourse-[0-9]*-*")}  # grader.grading.batch.ROOT_PREFIX, the batch's pid


def kit_hashes() -> dict:
    """A hash of every file under the kit's grader/ and exercises/, compiled files included."""
    out = {}
    for top in ("grader", "exercises"):
        for path in sorted((KIT / top).rglob("*")):
            if path.is_file():
                out[str(path.relative_to(KIT))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _sleepers() -> list:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if f.read().rstrip(b"\0") == SLEEPER:
                        found.append(int(entry))
            except OSError:
                pass
    return found


def _odd_folders(folder: Path) -> None:
    starter = KIT / "exercises" / "level2" / "agent.py"
    (folder / "only_x_x" / "x").mkdir(parents=True)
    (folder / "only_x_x" / "x" / "x").write_text("print('hello')\n")
    for name in ("evil|name\n| forged | 10 of 10 |", "caf\u00e9 \u2603"):
        (folder / name).mkdir()
        shutil.copy(starter, folder / name / "agent.py")
    (folder / "not_a_zip.zip").write_bytes(b"PK\x03\x04 this is not a zip at all")
    with zipfile.ZipFile(folder / "zip_bomb.zip", "w", zipfile.ZIP_DEFLATED) as z, z.open("agent.py", "w") as f:
        zeros = bytes(1 << 20)
        for _ in range(101):
            f.write(zeros)
    (folder / "linked_agent").mkdir()
    (folder / "linked_agent" / "agent.py").symlink_to(KIT / "solutions" / "level2" / "agent.py")
    (folder / "unreadable_extra").mkdir()
    shutil.copy(CORPUS / "good.py", folder / "unreadable_extra" / "agent.py")
    (folder / "unreadable_extra" / "notes.txt").write_text("private")
    (folder / "unreadable_extra" / "notes.txt").chmod(0)


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    if bubblewrap.check() is not None:
        pytest.skip(f"no bubblewrap box here: {bubblewrap.check()}")
    folder = tmp_path_factory.mktemp("submissions")
    for name in EXPECTED:
        (folder / name).mkdir()
        source = KIT / "exercises" / "level2" / "agent.py" if name == "starter" else CORPUS / f"{name}.py"
        shutil.copy(source, folder / name / "agent.py")
    sleeper = folder / "leaves_sleeper" / "agent.py"
    assert sleeper.read_text().count('"4242.5"') == 1
    sleeper.write_text(sleeper.read_text().replace('"4242.5"', repr(SLEEP_FOR)))
    _odd_folders(folder)
    for path in ESCAPES:
        path.unlink(missing_ok=True)
    SECRET.write_text(SECRET_TEXT)
    SECRET.chmod(0o600)
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("127.0.0.1", PORT))
        listener.listen(50)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        # A run of these tests in another checkout listens there already: the port is open either way.
    socket.create_connection(("127.0.0.1", PORT), timeout=10).close()  # reachable from outside a box
    hashes = kit_hashes()
    temp = folder.parent / "grade-temp"  # this batch's own temp folder, where its boxes live
    temp.mkdir()
    before_dirs = _grade_dirs(temp)
    before = sandbox.tree_state([str(folder)])
    out = folder.parent / "report.json"
    try:
        # The seed is the default one (same verdicts), given so that a submission could look for it.
        proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(folder), "--level", "2", "--jobs", "2",
                               "--timeout", "6", "--examples", "2", "--seed", str(plugin.DEFAULT_SEED),
                               "--output", str(out)], capture_output=True, text=True, timeout=240, cwd=KIT,
                              # grade's own imports write no .pyc: any change under the kit is a box's doing
                              env=dict(os.environ, TMPDIR=str(temp), PYTHONDONTWRITEBYTECODE="1"))
    finally:
        listener.close()
        SECRET.unlink(missing_ok=True)
    assert proc.returncode == 0, proc.stderr
    return {"report": json.loads(out.read_text()), "stderr": proc.stderr, "folder": folder, "before": before,
            "before_dirs": before_dirs, "hashes": hashes, "temp": temp}


@pytest.mark.bubblewrap
def test_the_report_has_the_contract_shape(batch):
    report = batch["report"]
    assert report["level"] == 2
    assert report["isolation"] == "bubblewrap"
    assert sorted(s["id"] for s in report["submissions"]) == sorted(list(EXPECTED) + list(ODD))
    for s in report["submissions"]:
        assert set(s) == {"id", "score", "max_score", "status", "error", "tests"}
        assert s["max_score"] == 10.0 or s["status"] == "error"
        for t in s["tests"]:
            assert set(t) == {"name", "status", "score", "max_score", "output"}
            assert t["status"] in ("passed", "failed", "error", "manual review")


@pytest.mark.parametrize("student", sorted(EXPECTED))
@pytest.mark.bubblewrap
def test_each_submission_earns_what_its_code_earns(batch, student):
    status, score, words = EXPECTED[student]
    if student in ("forges_recorded_ops", "forges_written_bytes", "kills_its_tracer", "floods_the_trace",
                   "writes_through_ctypes", "saves_in_a_forked_child", "saves_well_only_when_watched",
                   "saves_well_on_any_sign_of_a_recorder") + TRACED \
            and kernel_trace.problem():
        pytest.skip(f"no kernel trace here: {kernel_trace.problem()}; the forged operations are believed")
    got = {s["id"]: s for s in batch["report"]["submissions"]}[student]
    text = (got["error"] or "") + "\n".join(t["output"] for t in got["tests"])
    if student in OUTRUN and (got["status"], got["score"]) == OUTRUN[student][:2]:
        status, score, words = OUTRUN[student]
    assert (got["status"], got["score"]) == (status, score), text[:1500]
    if words:
        assert words in text, text[:1500]
    if student in OUTRUN:
        assert "the tracer that watches your code's file operations was killed" not in text, text[:1500]


# Hostile cases a learner's own pytest must score as grade does (the score and the tests that did not pass):
# code out of a Python patch's sight whose effects the recorder still follows (a save in a forked child),
# and code that looks for a sign neither face gives (sys.dont_write_bytecode set).
FACES_AGREE = ("saves_in_a_forked_child", "saves_well_without_bytecode", "saves_well_where_pytest_settings_are_missing")


def _own_pytest(source: Path, tmp: Path) -> tuple:
    """(points, sorted names of the tests that did not pass, output) of ``pytest exercises/level2`` on a copy,
    run as a learner usually runs it: with byte-code writing on (this machine turns it off; the caches go
    to a folder of the test's own, so the kit's files stay as they were)."""
    (tmp / "sub").mkdir()
    shutil.copy(source, tmp / "sub" / "agent.py")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", "exercises/level2",
                           "--submission", str(tmp / "sub")], capture_output=True, text=True, cwd=KIT, timeout=300,
                          env=env)
    points = re.search(r"crashcourse: ([\d.]+) of", done.stdout)
    assert points, done.stdout[-2000:] + done.stderr[-2000:]
    failing = sorted(set(re.findall(r"^(?:FAILED|ERROR) \S+::(\w+)", done.stdout, re.M)))
    return float(points.group(1)), failing, done.stdout


@pytest.mark.parametrize("student", FACES_AGREE)
@pytest.mark.bubblewrap
def test_its_own_pytest_gives_what_grade_gives(batch, student, tmp_path):
    if kernel_trace.problem():
        pytest.skip(f"no kernel trace here: {kernel_trace.problem()}")
    got = {s["id"]: s for s in batch["report"]["submissions"]}[student]
    graded = (got["score"], sorted(t["name"] for t in got["tests"] if t["status"] != "passed"))
    score, failing, text = _own_pytest(CORPUS / f"{student}.py", tmp_path)
    assert (score, failing) == graded, text[-3000:]


def test_check_gives_what_its_own_pytest_gives_when_a_sign_of_byte_code_decides(tmp_path):
    """``crashcourse check`` (its tests run in its own process, as ``watch``'s do) leaves
    sys.dont_write_bytecode as the learner's run has it, as their own pytest does: code that saves well
    only while it is set earns the same 6 from both (it once earned 10 under check, which set it)."""
    score, failing, text = _own_pytest(CORPUS / "saves_well_without_bytecode.py", tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path / "pycache")
    done = subprocess.run([sys.executable, "-m", "grader", "check", "2", "--path", str(tmp_path / "sub")],
                          capture_output=True, text=True, cwd=KIT, timeout=300, env=env)
    points = re.search(r"^\s+([\d.]+) of 10 points\s*$", done.stdout, re.M)
    assert points and float(points.group(1)) == score == 6.0, (score, done.stdout[-3000:])


@pytest.mark.bubblewrap
def test_a_known_gap_its_own_pytest_does_not_share(batch, tmp_path):
    """A loop keyed on a sign only grade's box gives saves in place under its own pytest (6, PARSE), where
    grade gives it 10 (EXPECTED above): the two faces differ, which is what the gap is."""
    for name in ("saves_well_where_pytest_is_not_loaded", "saves_well_when_the_worker_calls_it"):
        (tmp_path / name).mkdir()
        score, failing, text = _own_pytest(CORPUS / f"{name}.py", tmp_path / name)
        assert score == 6.0 and "PARSE" in text, (name, text[-3000:])


def test_a_write_its_own_pytest_cannot_see_is_told_as_such(tmp_path):
    """libc's write() through ctypes reaches the disk past every patch in Python: a learner's own pytest
    cannot follow it, so it scores nothing and says what it could not see, and that grade, which reads
    the kernel's account, judges such writes on what they do (6 of 10 there: they write in place)."""
    score, failing, text = _own_pytest(CORPUS / "writes_through_ctypes.py", tmp_path)
    assert score == 0.0 and "test_the_loop_still_finishes_the_task" in failing
    assert "checkpoint.json holds" in text and "a route the recorder does not see" in text
    assert "ctypes" in text and "crashcourse grade" in text and "kernel" in text, text[-3000:]


@pytest.mark.parametrize("student", sorted(ODD))
@pytest.mark.bubblewrap
def test_an_odd_folder_is_graded_or_refused_with_a_reason(batch, student):
    status, words = ODD[student]
    got = {s["id"]: s for s in batch["report"]["submissions"]}[student]
    text = (got["error"] or "") + "\n".join(t["output"] for t in got["tests"])
    assert got["status"] == status, text[:1500]
    if words:
        assert words in text, text[:1500]


@pytest.mark.bubblewrap
def test_no_attack_reports_an_escape(batch):
    for s in batch["report"]["submissions"]:
        if "ESCAPED" in (EXPECTED.get(s["id"], ("", 0, ""))[2] or ""):
            continue  # a known limit, expected above
        text = (s["error"] or "") + "\n".join(t["output"] for t in s["tests"])
        assert "ESCAPED" not in text, (s["id"], text[:1500])


@pytest.mark.bubblewrap
def test_a_linked_answers_md_does_not_bring_the_secret_into_the_report(batch):
    assert SECRET_TEXT not in json.dumps(batch["report"])
    got = {s["id"]: s for s in batch["report"]["submissions"]}["answers_symlink"]
    # No answers.md was handed in (the code made the link while it ran), so none is marked for review;
    # were one there, it would be a manual-review row without the secret.
    answers = [t for t in got["tests"] if t["name"].startswith("answers.md")]
    assert all(a["status"] == "manual review" for a in answers)


def test_the_judge_reads_a_box_file_without_following_a_link(tmp_path):
    (tmp_path / "submission").mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET_TEXT)
    (tmp_path / "submission" / "answers.md").symlink_to(secret)
    data, why = bubblewrap.read_box_file(str(tmp_path), "submission/answers.md")
    assert data is None and "symbolic link" in why
    (tmp_path / "submission" / "answers.md").unlink()
    (tmp_path / "submission" / "answers.md").write_bytes(b"x" * (bubblewrap.MAX_READ + 1))
    data, why = bubblewrap.read_box_file(str(tmp_path), "submission/answers.md")
    assert data is None and "at most" in why
    os.mkfifo(tmp_path / "submission" / "fifo")
    data, why = bubblewrap.read_box_file(str(tmp_path), "submission/fifo")
    assert data is None and "not a regular file" in why
    (tmp_path / "linked").symlink_to(tmp_path / "submission", target_is_directory=True)
    (tmp_path / "submission" / "answers.md").write_text("mine")
    assert bubblewrap.read_box_file(str(tmp_path), "linked/answers.md")[0] is None
    assert bubblewrap.read_box_file(str(tmp_path), "submission/answers.md") == (b"mine", "")


@pytest.mark.bubblewrap
def test_the_kits_files_are_unchanged(batch):
    assert kit_hashes() == batch["hashes"]


@pytest.mark.bubblewrap
def test_ids_cannot_forge_report_rows(batch):
    md = reports.to_markdown(batch["report"])
    assert not any(line.startswith("| forged") for line in md.splitlines())
    assert "evil\\|name \\| forged \\| 10 of 10 \\|" in md
    assert "NOT TAMPER-PROOF" not in md and "bubblewrap box" in md


@pytest.mark.bubblewrap
def test_fake_results_and_patched_pytest_earn_the_starters_score(batch):
    subs = {s["id"]: s for s in batch["report"]["submissions"]}
    starter = [t["status"] for t in subs["starter"]["tests"]]
    assert [t["status"] for t in subs["fake_results"]["tests"]] == starter
    assert [t["status"] for t in subs["patches_pytest"]["tests"]] == starter


@pytest.mark.bubblewrap
def test_nothing_is_left_behind(batch):
    assert _our_processes(batch["temp"]) == [], "a process from the graded submissions is still running"
    assert _sleepers() == [], "the process leaves_sleeper started outlived the batch"
    assert not any(p.exists() for p in ESCAPES), "a submission wrote outside its temporary folder"
    assert sandbox.tree_changes(batch["before"], sandbox.tree_state([str(batch["folder"])])) == []
    assert _grade_dirs(batch["temp"]) <= batch["before_dirs"], "a temporary grading folder was not removed"


@pytest.mark.bubblewrap
def test_every_report_format_reads_back(batch, tmp_path):
    report = batch["report"]
    md = reports.to_markdown(report)
    # The JSON contract carries no check ids (its shape is fixed), so a report rebuilt from it counts
    # none: `grade --format md` reads them from the batch itself (tests/test_check_registry.py).
    assert "| (none) | 0 | |" in md and "Could not be graded" in md
    rows = list(__import__("csv").reader(reports.to_csv(report).splitlines(keepends=True)))
    assert rows[0][:5] == ["id", "status", "score", "max_score", "error"] and rows[0][-1] == "isolation"
    assert len(rows) == 1 + len(EXPECTED) + len(ODD)
    assert all(row[-1] == "bubblewrap" for row in rows[1:])
    written = reports.write_gradescope(report, str(tmp_path / "gs"))
    assert len(written) == len(EXPECTED) + len(ODD)
    good = json.loads((tmp_path / "gs" / "good" / "results.json").read_text())
    assert good["score"] == 10.0
    assert "bubblewrap box" in good["output"]
    assert all(t["status"] == "passed" for t in good["tests"] if t["max_score"])


def test_grade_refuses_without_a_box(tmp_path):
    """A bwrap that cannot make a box: grade says why and what to do, and grades nothing."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    (tmp_path / "subs" / "good").mkdir(parents=True)
    shutil.copy(CORPUS / "good.py", tmp_path / "subs" / "good" / "agent.py")
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}")
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(tmp_path / "subs"), "--level", "2",
                           "--output", str(out)], capture_output=True, text=True, timeout=120, cwd=KIT, env=env)
    assert proc.returncode == 2 and not out.exists()
    assert "No permissions to create new namespace" in proc.stderr
    assert "--no-box" in proc.stderr and "user namespaces" in proc.stderr
    # Asked for explicitly, it grades, and the report says what that means.
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(tmp_path / "subs"), "--level", "2",
                           "--examples", "1", "--no-box", "--format", "md", "--output", str(out)],
                          capture_output=True, text=True, timeout=120, cwd=KIT, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "warning: grading without a box" in proc.stderr
    report = out.read_text()
    assert "NOT TAMPER-PROOF (isolation: none)" in report and "| good | passed | 10 / 10 |" in report


def test_the_reports_of_an_unboxed_batch_say_so():
    batch = {"level": 2, "isolation": "none", "submissions": [
        {"id": "a", "score": 1.0, "max_score": 1.0, "status": "passed", "error": None,
         "tests": [{"name": "t", "status": "passed", "score": 1.0, "max_score": 1.0, "output": ""}]}]}
    assert json.loads(reports.to_json(batch))["isolation"] == "none"
    assert "NOT TAMPER-PROOF" in reports.to_markdown(batch)
    assert reports.to_csv(batch).splitlines()[1].endswith("none (not tamper-proof)")
    assert "NOT TAMPER-PROOF" in reports.gradescope_result(batch["submissions"][0], 0, "none")["output"]


@pytest.mark.parametrize("protected", [False, True], ids=["ordinary process", "not dumpable"])
def test_a_judge_cannot_be_read_by_another_process_of_its_user(tmp_path, protected):
    """What grade and every judge do at start (PR_SET_DUMPABLE 0): another process of the same
    ordinary user can no longer read its environment (an API key) or attach a debugger to it."""
    python = shutil.which("python3", path="/usr/bin:/bin")
    if os.geteuid() != 0 or python is None:
        pytest.skip("needs root (to act as an ordinary user) and a system python3")
    nobody = 65534
    code = ("import sys, time; sys.path.insert(0, sys.argv[1]); from grader.grading import bubblewrap; "
            f"{'bubblewrap.not_dumpable(); ' if protected else ''}print('ready', flush=True); time.sleep(30)")
    target = subprocess.Popen([python, "-c", code, str(KIT)], stdout=subprocess.PIPE, text=True,
                              env={"ANTHROPIC_API_KEY": "sk-instructor-only", "PATH": "/usr/bin:/bin"},
                              preexec_fn=lambda: (os.setgid(nobody), os.setuid(nobody)))
    try:
        if target.stdout.readline().strip() != "ready":
            pytest.skip("an ordinary user cannot import the kit from where it is checked out")
        peek = subprocess.run([python, "-c", f"print(open('/proc/{target.pid}/environ', 'rb').read())"],
                              capture_output=True, text=True, timeout=30,
                              preexec_fn=lambda: (os.setgid(nobody), os.setuid(nobody)))
    finally:
        target.kill()
        target.wait()
    assert ("sk-instructor-only" in peek.stdout) is not protected, peek.stdout + peek.stderr


def test_a_box_binds_only_its_allowlist(monkeypatch):
    """Read-only binds: /usr, Python, grader/; never the kit root, nor a level's tests (checks run outside)."""
    args = bubblewrap.command("/tmp/some-box", ["true"], cwd="/", limits=bubblewrap.Limits())
    bound = [args[i + 1] for i, a in enumerate(args) if a == "--ro-bind"]
    assert str(KIT / "grader") in bound
    assert not any(p.startswith(str(KIT / "exercises")) for p in bound), bound
    assert not any(p == str(KIT) or (str(KIT).startswith(p + "/") and p not in ("/usr",)) for p in bound), bound
    assert args[args.index("--bind") + 1] == "/tmp/some-box"
    # A kit unpacked inside the Python installation is covered, then only grader/ shows through.
    monkeypatch.setattr(bubblewrap, "KIT_PARENT", sys.prefix + "/src/kit")
    args = bubblewrap.command("/tmp/some-box", ["true"], cwd="/", limits=bubblewrap.Limits())
    assert args.index(sys.prefix + "/src/kit") < args.index(sys.prefix + "/src/kit/grader")
    assert args[args.index(sys.prefix + "/src/kit") - 1] == "--tmpfs"


@pytest.mark.bubblewrap
def test_a_syntax_error_is_shown_once_as_python_shows_it(batch):
    """The submission's error and its first test show Python's own report; the other tests name it."""
    got = {s["id"]: s for s in batch["report"]["submissions"]}["syntax_error"]
    first, *rest = [t for t in got["tests"] if t["status"] != "manual review"]
    for text in (got["error"], first["output"]):
        assert 'File "agent.py", line 4' in text and "SyntaxError:" in text, text
        assert "During handling" not in text
    assert rest and all("Not run:" in t["output"] and "SyntaxError" not in t["output"] for t in rest), rest


@pytest.mark.bubblewrap
def test_a_huge_exception_message_is_cut_in_every_report_entry(batch):
    """raises_a_huge_message raises with 40 MB of text: each test's output stays the size of a page."""
    got = {s["id"]: s for s in batch["report"]["submissions"]}["raises_a_huge_message"]
    assert got["tests"] and all(len(t["output"]) < 20_000 for t in got["tests"]), [len(t["output"]) for t in got["tests"]]
    assert len(got["error"] or "") < 20_000


@pytest.mark.bubblewrap
def test_an_exception_shows_the_learners_frames_never_the_kits(batch):
    got = {s["id"]: s for s in batch["report"]["submissions"]}["allocates_6gib"]
    told = [t for t in got["tests"] if "MemoryError" in t["output"] and not t["output"].startswith("Not checked")]
    assert told, "no test tells the MemoryError in full"
    for t in told:
        if True:  # the tests that share the run name it in one line ("Not checked")
            assert "agent.py\", line" in t["output"] and "grader" + os.sep not in t["output"], t["output"]
            assert t["output"].count("MemoryError") == 1, t["output"]


# -- the process cap, as root, without a cgroup -------------------------------------------------------

FORKS = """
import errno, json, os, time
started, failed = 0, None
try:
    while started < 200:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        started += 1
except OSError as exc:
    failed = errno.errorcode.get(exc.errno, str(exc.errno))
with open("forks.json", "w") as f:
    json.dump({"started": started, "failed": failed, "uid": os.getuid()}, f)
"""


def _box_as_a_judge_runs_it(root: Path, code: str, limits) -> dict:
    """Run ``code`` in a box the way a judge started by root does (its own disk, handed to the box's uid),
    with no cgroup: only RLIMIT_NPROC can hold its processes. Returns what the judge saw."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        said = {}
        try:
            os.close(r)
            bubblewrap.private_disk(str(root), 16 * 1024 ** 2)
            proc = bubblewrap._launch(str(root), [sys.executable, "-I", "-S", "-c", code], cwd=str(root),
                                      limits=limits, cgroup=None, env=sandbox.scrubbed_env(str(root), "t"),
                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            out, _ = proc.communicate(timeout=60)
            said = {"box_uid": bubblewrap.box_uid(), "status": proc.returncode, "output": out.decode()[-2000:]}
            data, why = bubblewrap.read_box_file(str(root), "forks.json")
            said["forks"] = json.loads(data) if data else why
            said["owner"] = os.lstat(root / "forks.json").st_uid if data else None
        except BaseException as exc:  # noqa: BLE001 - the parent asserts on what happened
            said["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            os.write(w, json.dumps(said).encode())
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        said = json.loads(f.read() or b"{}")
    os.waitpid(pid, 0)
    return said


def _root_with_own_uids() -> None:
    if os.geteuid() != 0:
        pytest.skip("as an ordinary user the box is that user's uid, and RLIMIT_NPROC already holds")
    if bubblewrap.check() is not None:
        pytest.skip(f"no bubblewrap box here: {bubblewrap.check()}")
    if bubblewrap.own_uid_problem() is not None:
        pytest.skip(f"boxes cannot have uids of their own here: {bubblewrap.own_uid_problem()}")


@pytest.mark.bubblewrap
def test_a_box_graded_by_root_cannot_fork_past_its_cap_without_a_cgroup(tmp_path):
    """The kernel never applies RLIMIT_NPROC to uid 0; a box graded by root runs as a uid of its own,
    so it does: fork fails with EAGAIN once the box holds its share of processes."""
    _root_with_own_uids()
    limits = bubblewrap.Limits(processes=16)
    seen = _box_as_a_judge_runs_it(tmp_path, FORKS, limits)
    assert "error" not in seen and seen["status"] == 0, seen
    forks = seen["forks"]
    assert forks["failed"] == "EAGAIN", seen
    # bwrap's two processes and the box's first one count too
    assert limits.processes - 5 <= forks["started"] < limits.processes, seen
    assert forks["uid"] == bubblewrap.INSIDE_UID
    # Outside, the file it wrote is its own uid's, not root's
    assert seen["owner"] == seen["box_uid"] >= bubblewrap.BOX_UID_BASE, seen


@pytest.mark.bubblewrap
def test_boxes_graded_by_root_cannot_signal_each_other_even_outside_their_pid_namespaces(tmp_path):
    """Two judges' boxes are two uids. Seen from the host (as if a box had left its pid namespace),
    one box's uid may not signal the other's process, nor the judge's."""
    _root_with_own_uids()
    python = shutil.which("python3", path="/usr/bin:/bin")  # one that any uid may run
    if python is None:
        pytest.skip("needs a system python3")
    sleeper = subprocess.Popen([python, "-c", "import time; time.sleep(30)"],
                               preexec_fn=lambda: os.setresuid(*(bubblewrap.BOX_UID_BASE + 1,) * 3))
    try:
        code = ("import os, sys\n"
                "for pid in map(int, sys.argv[1:]):\n"
                "    try:\n        os.kill(pid, 0)\n        print('reached', pid)\n"
                "    except PermissionError:\n        print('refused', pid)\n")
        other = subprocess.run([python, "-c", code, str(sleeper.pid), str(os.getpid())],
                               capture_output=True, text=True, timeout=30,
                               preexec_fn=lambda: os.setresuid(*(bubblewrap.BOX_UID_BASE + 2,) * 3))
    finally:
        sleeper.kill()
        sleeper.wait()
    assert other.stdout.split() == ["refused", str(sleeper.pid), "refused", str(os.getpid())], other


def test_without_uids_of_their_own_the_note_says_what_root_loses(monkeypatch):
    """Where user namespaces are off for other users, the boxes run as root's uid: the batch's note
    says why, what to enable, and that without a cgroup nothing caps their processes."""
    if os.geteuid() != 0:
        pytest.skip("only root hands boxes uids of their own")
    problem = "user namespaces are off for users other than root here (user.max_user_namespaces is 0)"
    monkeypatch.setitem(bubblewrap._UID_CHECK, "result", problem)

    class NoCgroup:
        kinds: list = []

        def __init__(self, *args):
            pass

        def remove(self):
            pass

    monkeypatch.setattr(bubblewrap, "Cgroup", NoCgroup)
    note = bubblewrap.cap_note()
    assert problem in note and "nothing caps how many processes" in note
    monkeypatch.setitem(bubblewrap._UID_CHECK, "result", None)
    assert bubblewrap.cap_note() is None


def test_a_box_with_a_uid_of_its_own_starts_through_setpriv_from_the_stage(monkeypatch, tmp_path):
    """As its own uid, bwrap binds each folder from the stage (which that uid can walk) to the same
    path as outside; the command drops to the uid before bwrap; without a uid nothing changes."""
    level3 = str(KIT / "exercises" / "level3")
    root = "/tmp/some-box"
    staged = {p: f"/run/crashcourse-box-{i}" for i, p in enumerate(bubblewrap._bound((level3,)) + [root])}
    args = bubblewrap.command(root, ["true"], cwd=root, limits=bubblewrap.Limits(), also=(level3,),
                              uid=bubblewrap.BOX_UID_BASE + 7, staged=staged)
    uid = str(bubblewrap.BOX_UID_BASE + 7)
    assert args[1:6] == ["--reuid", uid, "--regid", uid, "--clear-groups"] and args[6] == "--"
    assert os.path.basename(args[0]) == "setpriv" and os.path.basename(args[7]) == "bwrap"
    pairs = {args[i + 2]: args[i + 1] for i, a in enumerate(args) if a in ("--ro-bind", "--bind")}
    for path, name in staged.items():
        assert pairs[path] == name, (path, pairs)
    plain = bubblewrap.command(root, ["true"], cwd=root, limits=bubblewrap.Limits(), also=(level3,))
    assert os.path.basename(plain[0]) == "bwrap" and plain[plain.index("--bind") + 1] == root
    # The stage covers a folder none of the programs that start the box sit in.
    (tmp_path / "bin").mkdir()
    monkeypatch.setattr(bubblewrap, "STAGES", (str(tmp_path), "/tmp"))
    monkeypatch.setattr(bubblewrap.shutil, "which", lambda name: str(tmp_path / "bin" / name))
    assert bubblewrap._stage_place() == "/tmp"


@pytest.mark.bubblewrap
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="system call numbers for x86-64")
def test_a_box_answers_the_calls_no_account_can_follow_as_a_kernel_without_them(tmp_path):
    """Without any tracer, the box's own seccomp filter fails openat2 (ENOSYS), io_setup (ENOSYS),
    fallocate (EOPNOTSUPP), seccomp() (ENOSYS: a filter of the code's own could hand calls to a thread
    that lets them run unseen by the tracer) and ioctl's reflink copies (FICLONERANGE: EOPNOTSUPP, as on
    tmpfs), and still refuses a symbolic link (EPERM); the rest runs."""
    if bubblewrap.check() is not None:
        pytest.skip(f"no bubblewrap box here: {bubblewrap.check()}")
    code = ("import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); libc.syscall.restype = ctypes.c_long\n"
            "out = []\n"
            "for nr, args in ((437, (ctypes.c_long(-100), b'x', None, ctypes.c_long(24))), (206, (8, None)),\n"
            "                 (285, (0, 0, 0, 1)), (317, (1, 8, None)), (16, (0, 0x4020940D, None)),\n"
            "                 (16, (0, 0x5401, None)), (88, (b'a', b'b')), (39, ())):\n"
            "    r = libc.syscall(ctypes.c_long(nr), *args)\n"
            "    out.append(str(ctypes.get_errno() if r < 0 else 0))\n"
            "print(' '.join(out))\n")
    fd = bubblewrap.seccomp_fd()
    limits = bubblewrap.Limits()
    try:
        cmd = bubblewrap.command(str(tmp_path), [sys.executable, "-I", "-S", "-c", code], cwd=str(tmp_path),
                                 limits=limits, seccomp_fd=fd)
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, pass_fds=(fd,),
                              env=sandbox.scrubbed_env(str(tmp_path), "t"))
    finally:
        os.close(fd)
    said = done.stdout.split()
    assert said[:5] + said[6:] == [str(errno.ENOSYS), str(errno.ENOSYS), str(errno.EOPNOTSUPP), str(errno.ENOSYS),
                                   str(errno.EOPNOTSUPP), str(errno.EPERM), "0"], done.stdout + done.stderr
    assert said[5] != str(errno.EOPNOTSUPP), said  # another ioctl (TCGETS) is the kernel's to answer
