"""Saves handed to the kernel a few bytes at a time, held to their true scores on both faces: the learner's
``pytest exercises/levelN --submission DIR`` and ``crashcourse grade`` (one batch per level, in the sandbox
where there is one).

What was wrong: each small write counted as one file operation, and one run is judged on at most 20,000 of
them (grader.grading.kernel_trace.MAX_OPS). ``c61`` makes some 24,000 writes on the longest generated
conversation, so ``grade`` scored the run as broken while its own pytest passed it; level 3's replay kept a
copy of the temp file after each write until its fsync, past its 64 MiB, so ``right_small_writes_then_fsync``
got 9 of 10 on both faces. Writes made back to back through one file are one operation now, and the crash
models still crash between any two of them (``tests/test_joined_writes.py``). The wrong ones write the same
way and keep their scores: the kill between two small writes is still there to catch them.
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

from grader.grading import bubblewrap

KIT = Path(__file__).resolve().parent.parent
CORPUS = KIT / "tests" / "corpus"
GEN = "test_every_crash_state_of_generated_conversations"
MID_SAVE = "test_a_crash_mid_save_never_leaves_half_a_file"

# level -> {corpus entry: (score, the tests that fail, words the first failure holds ("" for none))}
CASES = {
    2: {**{f"level2/{name}.py": (10, (), "") for name in (
            "c60_line_buffered_json_dump_with_indent", "c61_os_write_loop_of_small_chunks",
            "c62_print_per_line_line_buffered", "c63_class_writer_field_by_field", "c64_writelines_unbuffered_chunks")},
        "level2/w65_small_writes_straight_into_the_checkpoint.py": (
            6, (MID_SAVE, GEN), "This save writes checkpoint.json itself"),
        "level2/w66_renamed_before_its_last_small_write.py": (
            # (Told as bytes left in Python's buffer, as a `with` block's would be: the trace cannot tell the two.)
            6, (MID_SAVE, GEN), "reached it only after the rename")},
    3: {"level3/right_small_writes_then_fsync": (10, (), "")},
}
FILES = {2: "agent.py", 3: "agent.py"}
IDS = [(level, case) for level, cases in CASES.items() for case in cases]
# The verdicts held here are about what is counted and crashed, not about the machine's speed: these saves make
# tens of thousands of system calls a run, and under `grade` each is stopped and printed by strace (tens of
# microseconds each, more on a loaded machine), so the 5-second limit on one run is raised for both faces
# alike. (The README's known limits say what the limit means for such saves.)
ENV = dict(os.environ, CRASHCOURSE_LOOP_TIMEOUT="30")


def _stem(case: str) -> str:
    return Path(case).stem


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("joined")
    for level, case in IDS:
        source, target = CORPUS / case, tmp / f"level{level}" / _stem(case)
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            target.mkdir(parents=True)
            shutil.copy(source, target / FILES[level])
    return tmp


@pytest.fixture(scope="module")
def graded(folders) -> dict:
    box = [] if bubblewrap.check() is None else ["--no-box"]
    out = {}
    for level in CASES:
        report = folders / f"report{level}.json"
        done = subprocess.run([sys.executable, "-m", "grader", "grade", str(folders / f"level{level}"), "--level",
                               str(level), "--no-progress", "--output", str(report), *box],
                              capture_output=True, text=True, cwd=KIT, timeout=900, env=ENV)
        assert report.exists(), done.stderr[-3000:]
        out[level] = {s["id"]: s for s in json.loads(report.read_text())["submissions"]}
    return out


@pytest.mark.parametrize("level, case", IDS, ids=[_stem(c) for _, c in IDS])
def test_grade_gives_the_true_score_and_story(graded, level, case):
    score, failing, words = CASES[level][case]
    got = graded[level][_stem(case)]
    failed = {t["name"] for t in got["tests"] if t["status"] != "passed"}
    assert (got["score"], failed) == (score, set(failing)), (got["status"], got.get("error"), failed)
    if words:
        assert any(words in t["output"] for t in got["tests"] if t["status"] != "passed"), got["tests"]


@pytest.mark.slow  # one pytest run per case; tests/test_level2.py and test_level3.py hold the verdicts in-process
@pytest.mark.parametrize("level, case", IDS, ids=[_stem(c) for _, c in IDS])
def test_the_learners_pytest_gives_the_same(folders, level, case):
    score, failing, words = CASES[level][case]
    done = subprocess.run([sys.executable, "-m", "pytest", str(KIT / "exercises" / f"level{level}"), "-q",
                           "-p", "no:cacheprovider", "--submission", str(folders / f"level{level}" / _stem(case))],
                          capture_output=True, text=True, cwd=KIT, timeout=600, env=ENV)
    points = re.search(r"crashcourse: ([\d.]+) of ([\d.]+) points", done.stdout)
    assert points, done.stdout[-3000:] + done.stderr[-2000:]
    failed = {line.split("::")[-1].split()[0] for line in done.stdout.splitlines()
              if line.startswith(("FAILED ", "ERROR "))}
    assert (float(points.group(1)), failed) == (score, set(failing)), done.stdout[-3000:]
    assert words in done.stdout
