"""Fresh corpus cases over levels 1 to 6 (round 4), each held to its true score and failing tests on both
faces: the learner's ``pytest exercises/levelN --submission DIR`` and ``crashcourse grade`` (one batch per
level, in the sandbox where there is one).

Each score was worked out from what a kill (or, on level 3, a power cut) at each point leaves on disk
and what a resume does with it, before either face was asked. Four of them were wrong at first:

* ``level2/c30_save_through_a_helper_module``: correct code that imports a module of its own from
  beside agent.py got 0 from ``--submission`` and from ``grade`` (the folder was not on the import
  path; a workspace's own pytest had it there by luck of pytest's rootdir insertion).
* ``level2/w50_save_b_before_the_result_is_appended``: the lost result was told as COUNTS alone, so
  task 3's main test passed: 8 instead of 6.
* ``level4/wrong_turns_true_accepted``: ``"turns": true`` was never offered for refusal: 10 instead of 8.
* ``level4/wrong_finished_task_asked_again``: the score was right, the story was the scripted model's
  error; it now says the file held a finished task.
"""

from __future__ import annotations

import concurrent.futures
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.grading import bubblewrap

KIT = Path(__file__).resolve().parent.parent
CORPUS = KIT / "tests" / "corpus"
FILES = {1: "checkpoint.py", 2: "agent.py", 3: "agent.py", 4: "resume.py", 5: "agent.py", 6: "agent.py"}

ALL_1 = ("test_the_file_holds_exactly_the_six_fields", "test_without_turns_the_turn_cap_overshoots",
         "test_without_tokens_used_the_spend_budget_trips_late", "test_without_version_a_future_format_loads_silently",
         "test_without_task_resume_cannot_say_what_it_resumes", "test_without_messages_resume_starts_over")
GEN = "test_every_crash_state_of_generated_conversations"

# level -> {corpus entry: (score, the tests that fail, words the first failure holds ("" for none))}
CASES = {
    1: {"level1/c07_dataclass_bytes_sorted_keys.py": (13, (), ""),
        "level1/c08_os_open_excl_generator_checks.py": (13, (), ""),
        "level1/w17_version_checked_with_isinstance.py": (11, ("test_load_refuses_versions_it_does_not_know",),
                                                          "whose `version` is true"),
        "level1/w18_get_on_a_json_list.py": (11, ("test_load_refuses_a_file_it_cannot_resume_from",),
                                             "with AttributeError, not CheckpointError"),
        "level1/w19_nulls_dropped_from_the_file.py": (6, ALL_1, "no `pendingToolUse`"),
        "level1/c09_version_checked_with_is.py": (13, (), ""),
        "level1/w20_default_str_saves_runtime_keys.py": (11, ("test_the_file_holds_exactly_the_six_fields",),
                                                         "extra keys that are not part of the protocol")},
    2: {"level2/c27_recursive_turns.py": (10, (), ""),
        "level2/c28_generator_of_turns.py": (10, (), ""),
        "level2/c29_indent_sort_keys_no_ascii_locale_encoding.py": (10, (), ""),
        "level2/c30_save_through_a_helper_module": (10, (), ""),
        "level2/c31_dataclass_state_fdopen_fdatasync.py": (10, (), ""),
        "level2/w48_tokens_added_up_after_the_loop.py": (
            8, ("test_the_file_is_current_when_the_model_is_called", GEN), "`tokensUsed` is 0"),
        "level2/w49_named_temporary_file_replaced_inside_with.py": (
            6, ("test_a_crash_mid_save_never_leaves_half_a_file", GEN), "still in Python's buffer"),
        "level2/w50_save_b_before_the_result_is_appended.py": (
            6, ("test_every_tool_call_that_starts_is_on_disk", GEN), "this save ran before its result was appended"),
        # Names relative to a folder descriptor, os.pwrite, os.writev, a save in a thread waited for, a
        # state printed at every save, a log beside the checkpoint, a temp name with a space and non-ASCII.
        **{f"level2/{name}.py": (10, (), "") for name in (
            "c32_dir_fd_relative_calls", "c33_pwrite_into_the_temp_file", "c34_writev_in_pieces",
            "c35_save_in_a_thread_joined_at_once", "c36_prints_the_state_at_every_save",
            "c37_log_file_beside_the_checkpoint", "c38_non_ascii_temp_name")}},
    3: {"level3/right_own_context_manager": (10, (), ""),
        "level3/right_fsync_given_the_file_object": (10, (), ""),
        "level3/right_o_excl_fdatasync": (10, (), ""),
        "level3/right_dir_fd_relative_calls": (10, (), ""),
        "level3/right_fsync_through_an_append_handle": (10, (), ""),
        "level3/wrong_save_a_not_synced": (3, ("test_the_data_is_on_disk_before_the_rename",
                                               "test_a_save_that_returned_is_never_undone", GEN), "")},
    4: {"level4/right_recursive_at_most_once": (10, (), ""),
        "level4/wrong_cap_off_by_one": (9, ("test_the_turn_cap_counts_the_turns_before_the_crash",), ""),
        "level4/wrong_finished_task_asked_again": (
            5, ("test_the_pending_call_is_answered_once", "test_a_b_only_checkpoint_hides_the_call_in_flight", GEN),
            "the file holds a finished task"),
        "level4/wrong_turns_true_accepted": (8, ("test_a_checkpoint_you_cannot_trust_is_refused",), "`turns` is true")},
    5: {"level5/right/generator_and_pending_by_id.py": (10, (), ""),
        "level5/wrong/pending_without_input.py": (
            6, ("test_every_call_the_model_named_is_on_disk_before_any_runs", GEN), "each item should be exactly"),
        "level5/wrong/turns_counted_when_the_calls_are_named.py": (
            7, ("test_no_result_is_lost_or_doubled_and_the_counts_agree", GEN), "`turns` is 3 but messages hold 0"),
        "level5/right/each_call_in_a_thread_joined.py": (10, (), ""),
        "level5/wrong/last_result_of_a_turn_not_saved.py": (
            6, ("test_each_result_is_on_disk_before_the_next_call_starts", GEN), "but the file does not hold it")},
    6: {"level6/right/loader_skips_an_unparseable_last_line.py": (10, (), ""),
        "level6/right/journal_handle_kept_open.py": (10, (), ""),
        "level6/wrong/lines_repeat_everything_since_the_snapshot.py": (
            6, ("test_the_bytes_written_grow_linearly_with_the_turns",), "the limit is 10 from turn 50 on"),
        "level6/wrong/journal_opened_with_w.py": (
            5, ("test_every_crash_state_loads_as_one_whole_save", "test_every_tool_call_that_starts_is_still_on_disk",
                GEN), ""),
        "level6/wrong/journal_emptied_before_the_snapshot_lands.py": (
            5, ("test_every_crash_state_loads_as_one_whole_save", "test_every_tool_call_that_starts_is_still_on_disk",
                GEN), "opened check points/journal.jsonl for writing and emptied it"),
        # Caught only where the text holds U+2028 and the like: the generated conversations.
        "level6/wrong/loader_splits_lines_on_unicode_separators.py": (9, (GEN,), "")},
}
IDS = [(level, case) for level, cases in CASES.items() for case in cases]


def _stem(case: str) -> str:
    return Path(case).stem.replace("/", "_")


def _lay_out(level: int, case: str, target: Path) -> None:
    source = CORPUS / case
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        target.mkdir(parents=True)
        shutil.copy(source, target / FILES[level])


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("round4")
    for level, case in IDS:
        _lay_out(level, case, tmp / f"level{level}" / _stem(case))
    return tmp


def _grade(folder: Path, level: int, report: Path) -> dict:
    box = [] if bubblewrap.check() is None else ["--no-box"]
    done = subprocess.run([sys.executable, "-m", "grader", "grade", str(folder), "--level", str(level),
                           "--no-progress", "--output", str(report), *box],
                          capture_output=True, text=True, cwd=KIT, timeout=900)
    assert report.exists(), done.stderr[-3000:]
    return {s["id"]: s for s in json.loads(report.read_text())["submissions"]}


@pytest.fixture(scope="module")
def graded(folders) -> dict:
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        jobs = {level: pool.submit(_grade, folders / f"level{level}", level, folders / f"report{level}.json")
                for level in CASES}
        return {level: job.result() for level, job in jobs.items()}


@pytest.mark.parametrize("level, case", IDS, ids=[_stem(c) for _, c in IDS])
def test_grade_gives_the_true_score_and_story(graded, level, case):
    score, failing, words = CASES[level][case]
    got = graded[level][_stem(case)]
    failed = {t["name"] for t in got["tests"] if t["status"] != "passed"}
    assert (got["score"], failed) == (score, set(failing)), (got["status"], got.get("error"), failed)
    if words:
        assert any(words in t["output"] for t in got["tests"] if t["status"] != "passed"), got["tests"]


@pytest.mark.slow  # one pytest run per case; the level tests hold the same verdicts in-process
@pytest.mark.parametrize("level, case", IDS, ids=[_stem(c) for _, c in IDS])
def test_the_learners_pytest_gives_the_same(folders, level, case):
    score, failing, words = CASES[level][case]
    done = subprocess.run([sys.executable, "-m", "pytest", str(KIT / "exercises" / f"level{level}"), "-q",
                           "-p", "no:cacheprovider", "--submission", str(folders / f"level{level}" / _stem(case))],
                          capture_output=True, text=True, cwd=KIT, timeout=600)
    points = re.search(r"crashcourse: ([\d.]+) of ([\d.]+) points", done.stdout)
    assert points, done.stdout[-3000:] + done.stderr[-2000:]
    failed = {line.split("::")[-1].split()[0] for line in done.stdout.splitlines()
              if line.startswith(("FAILED ", "ERROR "))}
    assert (float(points.group(1)), failed) == (score, set(failing)), done.stdout[-3000:]
    assert words in done.stdout
