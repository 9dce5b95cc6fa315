"""``crashcourse grade`` holds the crash-engine fidelity cases (issue 18) to their verdicts, through the
sandboxed worker, as the level tests hold them in-process:

- a level-5 loop that runs a turn's tools in a thread pool, graded ten times in one batch, gets the
  same score and the same failure text every time (only the submission's own name differs);
- a sample of level 2's new corpus cases (a folder that is not the default, a leftover temp file and
  a second run, a hard link, O_TMPFILE, a temporary folder inside the checkpoint folder) pass or
  fail as their VERDICT line says, and each failure names its real cause.
"""

from __future__ import annotations

import ast
import concurrent.futures
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.bubblewrap  # every test grades through crashcourse grade's box (tests/conftest.py: SYSTEM_MARKERS)
CORPUS = KIT / "tests" / "corpus"
THREADED = CORPUS / "level5" / "wrong" / "tools_in_a_thread_pool.py"
# Some of the level-2 cases added for issue 18 (the others are held in-process by tests/test_level2.py),
# with words their failure text must contain.
LEVEL2 = {
    "w21_run_agent_forgets_the_folder": "It wrote 'checkpoints/checkpoint.json'",
    "w24_temp_opened_exclusively": "FileExistsError",
    "w25_hard_link_kept_then_rewritten": "did nothing: both names were hard links to one file",
    "c10_o_tmpfile_then_linkat": "",
    "c11_temporary_directory_inside": "",
    # shutil.copyfile writes with sendfile, whose bytes strace does not print, and ends with a
    # sendfile of 0 bytes: the kernel's account must still agree with the recorder's.
    "c12_copy_of_the_previous_save": "",
    "w05_copyfile_from_tmp": "break PARSE",
}


# The other levels' new cases (issue 18), each with whether it must pass: a folder of its own
# (`directory` honoured), version true or 1.0, fsync faults, sync flags, leftovers, subfolders.
OTHERS = {
    1: {"level1/w12_version_true_or_float_loads.py": False},
    3: {"level3/right_o_sync_temp": True, "level3/right_fsync_bound_as_default": True,
        "level3/wrong_retries_fsync": False, "level3/wrong_swallows_folder_fsync_error": False,
        "level3/wrong_os_sync_cannot_report_errors": False, "level3/wrong_ignores_directory": False,
        "level3/wrong_temp_without_o_trunc": False},
    4: {"level4/wrong_ignores_directory": False, "level4/wrong_version_true_or_float": False},
    5: {"level5/wrong/save_ignores_directory.py": False, "level5/wrong/temp_in_append_mode.py": False},
    6: {"level6/right/journal_in_wal_subfolder.py": True, "level6/wrong/journal_ignores_directory.py": False,
        "level6/wrong/snapshot_temp_opened_exclusively.py": False,
        "level6/wrong/sequence_numbers_restart_each_run.py": False},
}
FILES = {1: "checkpoint.py", 3: "agent.py", 4: "resume.py", 5: "agent.py", 6: "agent.py"}


def _grade(folder: Path, level: int, report: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "grader", "grade", str(folder), "--level", str(level),
                           "--examples", "1", "--output", str(report)],
                          capture_output=True, text=True, cwd=KIT, timeout=600)
    assert report.exists(), done.stderr[-3000:]
    return {s["id"]: s for s in json.loads(report.read_text())["submissions"]}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fidelity")
    for i in range(10):
        (tmp / "level5" / f"pool{i}").mkdir(parents=True)
        shutil.copy(THREADED, tmp / "level5" / f"pool{i}" / "agent.py")
    for name in LEVEL2:
        (tmp / "level2" / name).mkdir(parents=True)
        shutil.copy(CORPUS / "level2" / f"{name}.py", tmp / "level2" / name / "agent.py")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        five = pool.submit(_grade, tmp / "level5", 5, tmp / "report5.json")
        two = pool.submit(_grade, tmp / "level2", 2, tmp / "report2.json")
        return {5: five.result(), 2: two.result()}


def _failures(submission: dict) -> list:
    # The re-run command names the submission's folder; everything else must match.
    return [(t["name"], t["status"], re.sub(r"--submission \S+", "--submission X", t["output"]))
            for t in submission["tests"] if t["status"] != "passed"]


def test_a_thread_pool_loop_gets_the_same_score_and_reason_ten_times(graded):
    runs = graded[5]
    assert len(runs) == 10
    scores = {s["score"] for s in runs.values()}
    texts = {json.dumps(_failures(s)) for s in runs.values()}
    assert len(scores) == 1 and len(texts) == 1, (scores, [t[:300] for t in texts])
    failures = _failures(next(iter(runs.values())))
    assert failures and all("KEPT broken" in text for _, _, text in failures), failures
    assert not any("Traceback" in text or "EOFError" in text for _, _, text in failures)


@pytest.mark.parametrize("name", sorted(LEVEL2))
def test_level_2_fidelity_cases_get_their_verdicts_through_the_sandbox(graded, name):
    got = graded[2][name]
    first = ast.get_docstring(ast.parse((CORPUS / "level2" / f"{name}.py").read_text(encoding="utf-8"))).splitlines()[0]
    if first.startswith("VERDICT: pass"):
        assert got["score"] == got["max_score"] > 0, _failures(got)
    else:
        failures = _failures(got)
        assert got["score"] < got["max_score"] and failures
        assert any(LEVEL2[name] in text for _, _, text in failures), failures[0][2][:2000]


@pytest.fixture(scope="module")
def graded_others(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fidelity-levels")
    for level, cases in OTHERS.items():
        for case in cases:
            source = CORPUS / case
            target = tmp / f"level{level}" / Path(case).stem
            if source.is_dir():
                shutil.copytree(source, target)
            else:
                target.mkdir(parents=True)
                shutil.copy(source, target / FILES[level])
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        jobs = {level: pool.submit(_grade, tmp / f"level{level}", level, tmp / f"report{level}.json")
                for level in OTHERS}
        return {level: job.result() for level, job in jobs.items()}


@pytest.mark.parametrize("level, case", [(level, case) for level, cases in OTHERS.items() for case in cases],
                         ids=[Path(case).stem for cases in OTHERS.values() for case in cases])
def test_the_other_levels_fidelity_cases_get_their_verdicts_through_the_sandbox(graded_others, level, case):
    got = graded_others[level][Path(case).stem]
    if OTHERS[level][case]:
        assert got["score"] == got["max_score"] > 0, _failures(got)
    else:
        assert got["status"] != "error" and got["score"] < got["max_score"], (got["status"], got.get("error"),
                                                                               _failures(got)[:1])
