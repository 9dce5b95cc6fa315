"""Level 3 as a whole: the power-cut models catch each missing sync, the corpus is graded right, the
starter is red for its planted reason and the solution green.

The corpus in tests/corpus/level3 is graded in-process with the same engine calls and the same
platform checks the exercise's test file makes; one end-to-end run per folder goes through pytest.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.engine.crash_models import crash_states
from grader.engine.explore import NESTED_FOLDER, explore_loop, parent_exists
from grader.engine.recorder import Op
from grader.engine.scripted import from_turns, support_tickets
from grader.engine.loader import import_file
from grader.faces.plugin import Submission

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(__file__).resolve().parent / "corpus" / "level3"
# Corpus entries that are the shipped files themselves: graded from where they live, not from a copy.
SHIPPED = {
    "right_solution": ROOT / "solutions" / "level3" / "agent.py",
}


def submission_file(name):
    return SHIPPED.get(name, CORPUS / name / "agent.py")
KILLED_INVARIANTS = {"PARSE", "WHOLE", "ATOMIC-DIR", "TRACE", "PAIRING", "FRESH", "COUNTS", "RERUN"}


def load(path, name="agent"):
    return import_file(path, f"level3_{name}")


EXERCISE_TESTS = load(ROOT / "exercises" / "level3" / "test_agent.py", "tests")


def explore(agent_file, models, scenario=None):
    run = load(agent_file).run_agent
    return explore_loop(run, scenario or support_tickets(7), models=models, timeout=20, directory=NESTED_FOLDER,
                        before=parent_exists, rerun=scenario is None and tuple(models) == ("M1", "M2"))


def failed_checks(agent_file, tmp_path):
    """The level's checks that ``agent_file`` fails, named after the README's tasks."""
    failed = set()
    if explore(agent_file, ("M1", "M2")).tripped & (KILLED_INVARIANTS | {"ERROR", "UNSEEN"}):
        failed.add("killed")
    if not explore(agent_file, ("M3",)).ok:
        failed.add("M3")
    if not explore(agent_file, ("M4", "M5")).ok:
        failed.add("M4/M5")
    (tmp_path / "win").mkdir()
    (tmp_path / "eio").mkdir()
    submission = Submission(Path(agent_file).parent)  # the platform checks load agent.py from its folder
    if EXERCISE_TESTS.problem_where_folders_cannot_be_opened(submission, tmp_path / "win"):
        failed.add("windows")
    for fault in EXERCISE_TESTS.FSYNC_FAULTS:
        (tmp_path / "eio" / fault).mkdir()
        if EXERCISE_TESTS.problem_when_fsync_fails(submission, tmp_path / "eio" / fault, fault):
            failed.add("fsync-error")
            break
    if failed & {"killed", "M3", "M4/M5"}:
        return failed  # the generated conversations would only repeat those findings
    big = "ünïcode ☕ " * 1500
    for scenario in (from_turns("nothing to do", [], name="0 turns"),
                     from_turns("many", [("t", {"n": i, "x": [None, 1.5, "☕"]}, big) for i in range(3)], name="3 turns")):
        if not explore(agent_file, ("M1", "M2", "M3", "M4", "M5"), scenario).ok:
            failed.add("generated")
    return failed


EXPECTED = {
    "right_solution": set(),
    "right_low_level_os_calls": set(),
    "right_pathlib_class": set(),
    "wrong_starter_no_fsync": {"M3", "M4/M5", "fsync-error"},
    "wrong_file_fsync_only": {"M4/M5"},
    "wrong_dir_fsync_only": {"M3", "M4/M5", "fsync-error"},
    "wrong_fsync_without_flush": {"M3", "M4/M5"},
    "wrong_fsync_after_rename": {"M3", "M4/M5", "fsync-error"},
    "wrong_dir_fsync_before_rename": {"M4/M5"},
    "wrong_new_folder_not_synced": {"M4/M5"},
    "wrong_syncs_the_parent_only": {"M4/M5"},
    "wrong_swallows_fsync_errors": {"fsync-error"},
    "wrong_crashes_on_windows": {"windows"},
    "wrong_ignores_directory": {"killed", "M3", "M4/M5"},  # never wrote where it was told: every model says so
    "right_fsync_bound_as_default": set(),  # fsync bound at import is swapped in the defaults and seen
    "right_o_sync_temp": set(),  # O_SYNC writes are durable when they return
    "wrong_os_sync_cannot_report_errors": {"fsync-error"},  # durable (sync honoured), but deaf to EIO
    "wrong_temp_without_o_trunc": {"killed"},  # RERUN: the next run writes over a torn temp
    "wrong_retries_fsync": {"fsync-error"},  # fails once, then succeeds: a retry hides the lost data
    "wrong_swallows_folder_fsync_error": {"fsync-error"},
    # The first save renames a whole folder into place: durable once the parent is fsynced.
    "right_folder_renamed_into_place": set(),
    "wrong_folder_renamed_in_parent_not_synced": {"M4/M5"},
    # Every sync right, but the temp file is in the system temp folder, another file system: os.replace
    # fails with EXDEV at the first save, in every check (it was judged as a rename on one file system).
    "wrong_durable_temp_in_system_tmp": {"killed", "M3", "M4/M5", "windows", "fsync-error"},
    # Correct code written other ways: NamedTemporaryFile + fdatasync; O_DSYNC writes in chunks.
    "right_named_temporary_file_fdatasync": set(),
    "right_o_dsync_chunks_unique_name": set(),
    # The descriptor fsynced is the old checkpoint.json (opened before the rename): the new bytes are never
    # synced, and an EIO on the temp file's fsync cannot be met because that fsync never happens.
    "wrong_fsyncs_the_old_file": {"M3", "M4/M5", "fsync-error"},
    "wrong_fsync_before_the_last_write": {"M3", "M4/M5"},  # the closing brace is written after the fsync
    "wrong_syncs_the_working_folder": {"M4/M5"},  # fsyncs "." instead of the checkpoint's folder
    "wrong_syncs_the_folder_only_once": {"M4/M5"},  # a later save's rename is never made durable
    # fsync through a second, read-only descriptor of the temp file; a folder descriptor kept open all run.
    "right_fsync_through_a_second_descriptor": set(),
    "right_folder_descriptor_kept_open": set(),
    # A context manager of its own; os.fsync handed the file object; O_EXCL after clearing a stale temp,
    # os.fdatasync, and the folder through O_DIRECTORY (each falls back where a folder cannot be opened).
    "right_own_context_manager": set(),
    "right_fsync_given_the_file_object": set(),
    "right_o_excl_fdatasync": set(),
    # Both fsyncs skipped at save point A: a power cut while the tool runs can empty the file (M3) or
    # bring back the save before, which says nothing about the call (M4/M5).
    "wrong_save_a_not_synced": {"M3", "M4/M5"},
    # Every name relative to one folder descriptor (dir_fd, src_dir_fd, dst_dir_fd), that descriptor fsynced;
    # the temp file fsynced through a second handle opened in append mode after it was closed.
    "right_dir_fd_relative_calls": set(),
    "right_fsync_through_an_append_handle": set(),
    # Round 5: descriptors closed by an ExitStack, fdatasync, O_DIRECTORY; a writer class with a fresh
    # mkstemp name per save; os.fdopen(closefd=False) with the descriptor fsynced by hand.
    "right_exitstack_o_directory_fdatasync": set(),
    "right_class_writer_mkstemp_in_the_folder": set(),
    "right_fdopen_closefd_false": set(),
    # The folder's descriptor fsynced where the file's was meant (and opened with no fallback: windows).
    "wrong_fsyncs_the_folder_for_the_file": {"M3", "M4/M5", "fsync-error", "windows"},
    # fcntl(F_FULLFSYNC) only where the platform has it, no fallback: on Linux the file is never synced.
    "wrong_full_fsync_only_where_macos_has_it": {"M3", "M4/M5", "fsync-error"},
    "wrong_final_save_not_synced": {"M3", "M4/M5"},  # the final answer can be taken back after return
    "wrong_parent_synced_before_the_mkdir": {"M4/M5"},  # the new folder's entry is never synced
    "right_fsync_through_a_dup": set(),  # os.fsync of an os.dup of the temp file's descriptor
    # 64 bytes per os.write, then fsync: back-to-back writes are one operation (tests/test_grade_joined_writes.py).
    "right_small_writes_then_fsync": set(),
    # Round 6. Right: the durable write in a helper module of the learner's own (os.write, fdatasync,
    # O_DIRECTORY); pathlib with the rename outside the `with`, folders made top down, each parent synced.
    "right_durable_helper_module": set(),
    "right_pathlib_rename_outside_the_with": set(),
    "wrong_o_directory_without_a_fallback": {"windows"},  # os.O_DIRECTORY read inside `except OSError`
    "wrong_replace_in_a_finally": {"fsync-error"},  # the rename runs even when fsync raised
    # The temp file opened again with "w" to get a descriptor to fsync: every save leaves an empty file.
    "wrong_reopens_the_temp_with_w_to_fsync": {"killed", "M3", "M4/M5", "windows", "fsync-error"},
    # open(folder) raises IsADirectoryError on Linux; caught as "this platform cannot", so never synced.
    "wrong_folder_opened_with_open_and_skipped": {"M4/M5"},
    "right_fdatasync_on_file_and_folder": set(),  # fdatasync syncs a folder's entries as fsync does
}


def test_the_corpus_is_complete():
    on_disk = {p.name for p in CORPUS.iterdir() if (p / "agent.py").exists()} | set(SHIPPED)
    assert on_disk == set(EXPECTED)
    assert sum(1 for n in EXPECTED if n.startswith("right_")) >= 3
    assert sum(1 for n in EXPECTED if n.startswith("wrong_")) >= 6


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_submission_fails_exactly_its_planted_checks(name, tmp_path):
    assert failed_checks(submission_file(name), tmp_path) == EXPECTED[name]


def test_the_starter_is_the_level_2_solution_with_no_sync():
    starter = (ROOT / "exercises" / "level3" / "agent.py").read_text(encoding="utf-8")
    level2 = (ROOT / "solutions" / "level2" / "agent.py").read_text(encoding="utf-8")
    assert starter.split('"""', 2)[2] == level2.split('"""', 2)[2]
    assert "fsync" not in starter.split('"""', 2)[2]


def test_the_starter_leaves_an_empty_checkpoint_after_a_power_cut_under_m3():
    exploration = explore(ROOT / "exercises" / "level3" / "agent.py", ("M3",))
    empty = [v for v in exploration.violations if v.files.get("checkpoint.json") == b""]
    assert empty, exploration.report()
    # The first one falls right after the rename of save A of turn 1: the name landed, the data did not.
    assert empty[0].operation.startswith("after os.replace(") and "save point A" in empty[0].where
    assert all(v.invariant == "DURABLE" and v.model == "M3" for v in exploration.violations)
    # Mid-save (after the rename, before the save returned): the rule stated covers the save in
    # progress, and the rule the file breaks is said in words, not as a bare id after "What is wrong".
    told = empty[0].explain()
    assert "DURABLE broken: a power cut at any point leaves the last save that returned, or the one in progress" in told
    assert "What is wrong: the file the power cut left breaks PARSE: checkpoint.json holds 0 bytes" in told, told
    # A killed process is not a power cut: the same run is fine under M1 and M2.
    assert explore(ROOT / "exercises" / "level3" / "agent.py", ("M1", "M2")).ok


def test_without_a_directory_fsync_the_previous_checkpoint_comes_back_under_m5():
    for name in ("wrong_starter_no_fsync", "wrong_file_fsync_only"):
        exploration = explore(submission_file(name), ("M5",))
        rolled_back = [v for v in exploration.violations if "older save" in v.detail]
        assert rolled_back, f"{name}: {exploration.report()}"
        data = json.loads(rolled_back[0].files["checkpoint.json"])
        assert data["version"] == 1  # a whole, older save, not a torn one


def test_a_directory_fsync_alone_still_loses_the_data_under_m3():
    exploration = explore(CORPUS / "wrong_dir_fsync_only" / "agent.py", ("M3",))
    assert any(v.files.get("checkpoint.json") == b"" for v in exploration.violations), exploration.report()
    assert explore(CORPUS / "wrong_dir_fsync_only" / "agent.py", ("M5",)).tripped == {"DURABLE"}


def test_the_solution_holds_under_every_model_on_generated_conversations():
    from hypothesis import HealthCheck, given, settings

    from grader.engine.conversations import conversations

    run = load(ROOT / "solutions" / "level3" / "agent.py").run_agent

    @settings(max_examples=6, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(conversations(max_turns=6))
    def check(scenario):
        exploration = explore_loop(run, scenario, models=("M1", "M2", "M3", "M4", "M5"))
        assert exploration.ok, exploration.report()

    check()


# -- the power models themselves ----------------------------------------------------------------------

def _ops(*specs):
    return [Op(i, kind, **fields) for i, (kind, fields) in enumerate(specs)]


def test_m5_loses_a_folder_made_during_the_run_until_its_parent_is_fsynced(tmp_path):
    work = str(tmp_path)
    folder = os.path.join(work, "checkpoints")
    target = os.path.join(folder, "checkpoint.json")
    steps = [("mkdir", dict(path=folder)),
             ("open", dict(path=target + ".tmp", handle=1, flags=frozenset({"create", "trunc"}))),
             ("write", dict(path=target + ".tmp", handle=1, data=b"{}")),
             ("fsync", dict(path=target + ".tmp", handle=1)),
             ("close", dict(path=target + ".tmp", handle=1)),
             ("rename", dict(path=target + ".tmp", dest=target)),
             ("fsync", dict(path=folder, handle=2, is_dir=True))]
    unsynced = list(crash_states(_ops(*steps), {}, folder, models=("M5",), initial_dirs={work}))
    assert any(s.point == len(steps) and s.read("checkpoint.json") is None and "checkpoints/" in s.note
               for s in unsynced)
    synced = list(crash_states(_ops(*steps, ("fsync", dict(path=work, handle=3, is_dir=True))), {}, folder,
                               models=("M5",), initial_dirs={work}))
    assert [s.read("checkpoint.json") for s in synced if s.point == len(steps) + 1] == [b"{}"]


def test_m4_replays_a_truncate_when_an_earlier_write_is_missing(tmp_path):
    folder = str(tmp_path)
    target = os.path.join(folder, "checkpoint.json")
    steps = [("open", dict(path=target, handle=1, flags=frozenset({"create"}))),
             ("write", dict(path=target, handle=1, offset=0, data=b"abcdef")),
             ("truncate", dict(path=target, handle=1, size=3)),
             ("write", dict(path=target, handle=1, offset=3, data=b"XY"))]
    versions = {s.read("checkpoint.json") for s in crash_states(_ops(*steps), {}, folder, models=("M4",))
                if s.point == len(steps)}
    assert b"abcXY" in versions            # everything landed
    assert b"\0\0\0XY" in versions         # the first write missing: the truncate still applies
    assert b"abcXYf" in versions           # the truncate missing: the old tail shows past the last write


@pytest.fixture(scope="module")
def plugin_runs():
    """`pytest exercises/level3` on the starter and on the solution, run side by side."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", COLUMNS="100")
    base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "exercises/level3", "--crashcourse-examples", "2"]
    procs = {
        "starter": subprocess.Popen(base, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
        "solution": subprocess.Popen(base + ["-q", "--submission", "solutions/level3"], cwd=ROOT, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
    }
    return {name: (proc.communicate(timeout=300)[0], proc.returncode) for name, proc in procs.items()}


def test_pytest_on_the_starter_fails_exactly_the_planted_tests(plugin_runs):
    out, code = plugin_runs["starter"]
    assert code == 1, out[-3000:]
    failed = {line.split("::")[-1].split()[0] for line in out.splitlines() if line.startswith("FAILED ")}
    assert failed == {'test_a_save_that_returned_is_never_undone', 'test_a_failed_fsync_is_not_swallowed', 'test_every_crash_state_of_generated_conversations', 'test_the_data_is_on_disk_before_the_rename'}, out[-3000:]
    assert "Traceback" not in out


def test_pytest_with_the_solution_as_submission_passes(plugin_runs):
    out, code = plugin_runs["solution"]
    assert code == 0, out[-3000:]
    assert "10 of 10 points" in out
