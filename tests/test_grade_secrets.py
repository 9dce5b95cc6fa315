"""Nothing secret reaches a student: an instructor's --seed and --scenarios stay out of the feedback.

One batch, graded as an instructor would with ``--seed`` and a relative ``--scenarios`` path (the
judge changes folder before it reads the file), on the level-2 starter (so failures print re-run
lines) and on a working loop that tries to carry the instructor's scenario out: it puts the task it
was given in its exception, in the answers.md it rewrites while it runs, and in its printed output,
and it looks for the seed on the command lines it can see.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.grading import bubblewrap, reports

KIT = Path(__file__).resolve().parent.parent
SEED = 4242
SECRET_TASK = "Reconcile the instructor-only ledger ZQX-1187"
HANDED_IN = "My answers, as handed in.\n"

LEAKER = (KIT / "solutions" / "level2" / "agent.py").read_text() + f'''

import glob as _glob
import os as _os

_real_run = run_agent
_HERE = _os.path.dirname(_os.path.abspath(__file__))


def _seen_seed():
    for path in _glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(path, "rb") as f:
                words = f.read().split(b"\\0")
        except OSError:
            continue
        if b"{SEED}" in words or b"--seed={SEED}" in words:
            return True
    return False


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    if _seen_seed():
        raise RuntimeError("LEAK: the seed {SEED} is on a command line this code can read")
    if "ledger" in task:  # (a real attacker would tell the instructor's task by what it is not)
        with open(_os.path.join(_HERE, "answers.md"), "w") as f:
            f.write("LEAK: " + task)
        print("LEAK: " + task)
        raise RuntimeError("LEAK: " + task)
    return _real_run(task, tools, call_model, execute_tool, directory)
'''


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if bubblewrap.check() is not None:
        pytest.skip(f"no bubblewrap box here: {bubblewrap.check()}")
    where = tmp_path_factory.mktemp("secrets")
    subs = where / "subs"
    (subs / "starter").mkdir(parents=True)
    shutil.copy(KIT / "exercises" / "level2" / "agent.py", subs / "starter" / "agent.py")
    (subs / "leaker").mkdir()
    (subs / "leaker" / "agent.py").write_text(LEAKER)
    (subs / "leaker" / "answers.md").write_text(HANDED_IN)
    private = where / "private"
    private.mkdir()
    (private / "extra.json").write_text(json.dumps({"file": "agent.py", "function": "run_agent", "points": 1,
                                                    "scenarios": [{"name": "ledger ZQX", "task": SECRET_TASK,
                                                                   "turns": [["read", {"page": 1}, "ZQX rows"]]}]}))
    out = where / "report.json"
    env = {k: v for k, v in os.environ.items() if k != "CRASHCOURSE_ROOT"}
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", "subs", "--level", "2", "--examples", "1",
                           "--timeout", "20", "--jobs", "2", "--seed", str(SEED), "--scenarios", "private/extra.json",
                           "--output", str(out)], capture_output=True, text=True, timeout=300, cwd=where, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    return {s["id"]: s for s in report["submissions"]}, report


@pytest.mark.bubblewrap  # the `graded` batch runs in boxes (tests/conftest.py: SYSTEM_MARKERS)
def test_a_relative_scenarios_path_is_read(graded):
    subs, _ = graded
    names = [t["name"] for t in subs["starter"]["tests"]]
    assert "instructor scenario 1" in names
    assert subs["starter"]["status"] == "failed" and subs["starter"]["error"] is None


@pytest.mark.bubblewrap  # the `graded` batch runs in boxes (tests/conftest.py: SYSTEM_MARKERS)
def test_re_run_lines_name_no_instructor_seed(graded):
    subs, report = graded
    text = json.dumps(report)
    assert f"--crashcourse-seed {SEED}" not in text
    assert str(SEED) not in text
    failing = [t for t in subs["starter"]["tests"] if t["status"] == "failed" and t["name"].startswith("test_")]
    assert failing and all("pytest \"" in t["output"] for t in failing)  # the re-run line is still there
    result = reports.gradescope_result(subs["starter"])
    assert str(SEED) not in json.dumps(result)


@pytest.mark.bubblewrap  # the `graded` batch runs in boxes (tests/conftest.py: SYSTEM_MARKERS)
def test_the_scenario_is_never_quoted_to_the_student(graded):
    subs, report = graded
    assert SECRET_TASK not in json.dumps(report)
    for sub in subs.values():
        assert SECRET_TASK not in json.dumps(reports.gradescope_result(sub))
        assert "ledger ZQX" not in json.dumps(reports.gradescope_result(sub))
    scenario = [t for t in subs["leaker"]["tests"] if t["name"] == "instructor scenario 1"][0]
    assert scenario["status"] == "failed" and "RuntimeError" in scenario["output"]


@pytest.mark.bubblewrap  # the `graded` batch runs in boxes (tests/conftest.py: SYSTEM_MARKERS)
def test_answers_md_is_the_one_handed_in(graded):
    subs, _ = graded
    answers = [t for t in subs["leaker"]["tests"] if t["name"].startswith("answers.md")]
    assert answers and answers[0]["output"] == HANDED_IN


@pytest.mark.bubblewrap  # the `graded` batch runs in boxes (tests/conftest.py: SYSTEM_MARKERS)
def test_the_leaker_earns_what_its_code_earns(graded):
    """Its loop is the solution on every task but the instructor's: 10 of the level's points, 0 of 1."""
    subs, _ = graded
    leaker = subs["leaker"]
    text = "\n".join(t["output"] for t in leaker["tests"])
    assert "the seed" not in text, text[:2000]
    assert (leaker["score"], leaker["max_score"]) == (10.0, 11.0), text[:2000]


@pytest.mark.parametrize("spelling", [["--seed", str(SEED)], [f"--seed={SEED}"], ["--se", str(SEED)]],
                         ids=["--seed N", "--seed=N", "an abbreviation"])
def test_without_a_box_the_seed_is_on_no_command_line_the_code_can_read(tmp_path, spelling):
    """--no-box: the code runs beside grade, and may read every process's command line."""
    (tmp_path / "subs" / "leaker").mkdir(parents=True)
    (tmp_path / "subs" / "leaker" / "agent.py").write_text(LEAKER)
    (tmp_path / "subs" / "leaker" / "answers.md").write_text(HANDED_IN)
    out = tmp_path / "report.json"
    fake = tmp_path / "bin"  # a bwrap that cannot make a box: grade runs the code without one
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "CRASHCOURSE_ROOT"}
    env["PATH"] = f"{fake}:{env['PATH']}"
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", "subs", "--level", "2", "--examples", "1",
                           "--timeout", "20", "--no-box", *spelling, "--output", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["isolation"] == "none"
    leaker = report["submissions"][0]
    text = (leaker["error"] or "") + "\n".join(t["output"] for t in leaker["tests"])
    assert "the seed" not in text, text[:2000]
    assert (leaker["status"], leaker["score"]) == ("passed", 10.0), text[:2000]
