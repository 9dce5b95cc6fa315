"""``crashcourse grade`` holds the corpus cases of issue 26 to the verdicts and the words the level tests
give them in-process: each case is graded in the sandbox (one batch per level) and must pass or fail as
its corpus entry says, its failure naming what the in-process run names.
"""

from __future__ import annotations

import concurrent.futures
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.bubblewrap  # every test grades through crashcourse grade's box (tests/conftest.py: SYSTEM_MARKERS)
CORPUS = KIT / "tests" / "corpus"
FILES = {1: "checkpoint.py", 2: "agent.py", 3: "agent.py", 4: "resume.py", 5: "agent.py", 6: "agent.py"}

# level -> {corpus entry: words its failure must hold ("" for a pass)}
CASES = {
    2: {"level2/c13_folder_renamed_into_place.py": "",
        "level2/w31_swaps_folders_by_two_renames.py": "between the two renames of a folder swap",
        # The race is named in the box as in-process (a tighter race, where the kernel sees the thread's
        # writes and the call in another order than the recorder, is named by stand_in._racing).
        "level2/w32_save_a_in_a_thread_joined_late.py": "Save point A reached the disk only after `list_tickets`",
        # The box's /tmp is a file system of its own, as on a usual machine (and as in-process, where the
        # kit refuses the rename itself if need be): a rename from it fails with EXDEV, a move copies.
        "level2/w06_tmp_in_system_tmp.py": "copied its temp file from /tmp into checkpoint.json",
        "level2/w07_mkstemp_default_dir.py": "Invalid cross-device link",
        "level2/w33_mkdtemp_then_rename.py": "a rename cannot move a file from one file system to another",
        "level2/w34_pathlib_gettempdir_replace.py": "Invalid cross-device link",
        "level2/w35_fsynced_temp_moved_from_system_tmp.py": "copied its temp file from /tmp into checkpoint.json",
        "level2/c14_shutil_move_beside.py": "",
        # A second run after a crash is a process of its own (grader.engine.fresh), in the box as in pytest:
        # its counter of temp names starts again at 0 and meets the file the crash left.
        "level2/w36_temp_numbered_per_process.py": "the second run stopped with FileExistsError",
        "level2/c15_pathlib_named_temporary_file_dir.py": ""},
    1: {"level1/w14_temp_in_system_tmp.py": "Invalid cross-device link"},
    # The right one was failed under M5 by grade alone: the kernel trace took the fsync of the folder it
    # built for a file's (the folder had been renamed away by the time the judge looked).
    3: {"level3/right_folder_renamed_into_place": "",
        "level3/wrong_folder_renamed_in_parent_not_synced": "Was the folder itself new?",
        "level3/wrong_durable_temp_in_system_tmp": "Invalid cross-device link"},
    # Rebuilt from its message alone, the error was "TypeError: function takes exactly 5 arguments".
    4: {"level4/wrong_lets_unicode_error_escape": "resume_agent raised UnicodeDecodeError: 'utf-8' codec can't decode"},
    6: {"level6/wrong/loader_applies_a_torn_saves_complete_lines.py": "parts of two saves",
        "level6/wrong/old_lines_replayed_after_compaction.py": "messages from two saves were put together"},
}


def _grade(folder: Path, level: int, report: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "grader", "grade", str(folder), "--level", str(level),
                           "--examples", "1", "--output", str(report)],
                          capture_output=True, text=True, cwd=KIT, timeout=600)
    assert report.exists(), done.stderr[-3000:]
    return {s["id"]: s for s in json.loads(report.read_text())["submissions"]}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("round3")
    for level, cases in CASES.items():
        for case in cases:
            source, target = CORPUS / case, tmp / f"level{level}" / Path(case).stem
            if source.is_dir():
                shutil.copytree(source, target)
            else:
                target.mkdir(parents=True)
                shutil.copy(source, target / FILES[level])
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        jobs = {level: pool.submit(_grade, tmp / f"level{level}", level, tmp / f"report{level}.json") for level in CASES}
        return {level: job.result() for level, job in jobs.items()}


@pytest.mark.parametrize("level, case", [(level, case) for level, cases in CASES.items() for case in cases],
                         ids=[Path(case).stem for cases in CASES.values() for case in cases])
def test_each_case_gets_its_verdict_and_its_words_through_the_sandbox(graded, level, case):
    got = graded[level][Path(case).stem]
    failures = [t["output"] for t in got["tests"] if t["status"] != "passed"]
    words = CASES[level][case]
    if not words:
        assert got["score"] == got["max_score"] > 0, failures[:1]
    else:
        assert got["status"] != "error" and got["score"] < got["max_score"], (got["status"], got.get("error"))
        assert any(words in text for text in failures), failures[0][:2000] if failures else got
