"""A second run after a crash that stops is told as stopped, under ``grade`` and the learner's own pytest.

Level 2 runs the loop again in each folder a crash left leftovers in (RERUN). A second run can stop
part-way (it raises, or its process is killed) and leave a folder its recording cannot rebuild: the
steps it made after the recording's last word, or by another program, are missing. Such a run was
once passed over as "a hole in the trace", so the verdict hung on how much of the kernel's trace had
come in before the stop, which depends on the machine's load: ``kills_its_tracer`` earned 10 instead
of 7 about one time in six with a few batches running. Several copies are graded side by side here,
which makes the machine busy enough for the old race to show.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.grading import bubblewrap, kernel_trace

KIT = Path(__file__).resolve().parent.parent
CASES = {
    # name -> (its file, the points it earns, words its failing test says)
    "moves_aside": (KIT / "tests" / "corpus" / "level2" / "w57_second_run_moves_the_leftover_aside_and_stops.py", 7.0,
                    "the second run stopped with RuntimeError: found an unfinished save"),
    "kills_its_tracer": (KIT / "tests" / "corpus" / "hostile" / "kills_its_tracer.py", 7.0,
                         "your code killed the process that started it"),
}
COPIES = 4


@pytest.mark.strace
@pytest.mark.bubblewrap
@pytest.mark.skipif(kernel_trace.problem() is not None or bubblewrap.check() is not None,
                    reason="needs strace and a bubblewrap box")
def test_every_copy_of_a_second_run_that_stops_earns_the_same(tmp_path):
    subs = tmp_path / "subs"
    for name, (source, _, _) in CASES.items():
        for i in range(COPIES):
            (subs / f"{name}_{i}").mkdir(parents=True)
            shutil.copy(source, subs / f"{name}_{i}" / "agent.py")
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "grader", "grade", str(subs), "--level", "2", "--examples", "1",
                           "--jobs", "4", "--output", str(report), "--fresh", "--no-progress"],
                          capture_output=True, text=True, cwd=KIT, timeout=900)
    assert report.exists(), done.stderr[-3000:]
    for got in json.loads(report.read_text())["submissions"]:
        _, score, words = CASES[got["id"].rsplit("_", 1)[0]]
        told = "\n".join(t["output"] for t in got["tests"] if t["status"] != "passed")
        assert (got["status"], got["score"]) == ("failed", score), (got["id"], told[:1500])
        assert "RERUN broken" in told and words in told, (got["id"], told[:1500])


def test_its_own_pytest_tells_the_second_run_that_stopped(tmp_path):
    (tmp_path / "agent.py").write_bytes(CASES["moves_aside"][0].read_bytes())
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "exercises/level2",
                           "--submission", str(tmp_path)], capture_output=True, text=True, cwd=KIT, timeout=600)
    found = re.search(r"(\d+(?:\.\d+)?) of 10 points", done.stdout)
    assert found and float(found.group(1)) == CASES["moves_aside"][1], done.stdout[-2000:]
    assert "RERUN broken" in done.stdout and CASES["moves_aside"][2] in done.stdout, done.stdout[-2000:]
