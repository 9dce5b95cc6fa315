"""A new level, made from templates/level/ as CONTRIBUTING.md says, is picked up by every command.

The test builds a throwaway kit in a temp folder: a copy of grader/ as it is, the template's level
module saved as grader/levels/toy.py, the template's starter, solution, tests, README and hints in
their folders, and a manifest holding the template's entry. Nothing else is edited. Then selfcheck,
check, demo and grade run there as a maintainer would run them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parent.parent
TEMPLATE = KIT / "templates" / "level"


@pytest.fixture(scope="module")
def toy_kit(tmp_path_factory):
    root = tmp_path_factory.mktemp("toykit")
    shutil.copytree(KIT / "grader", root / "grader", ignore=shutil.ignore_patterns("__pycache__"))
    entry = json.loads((TEMPLATE / "manifest_entry.json").read_text())
    # The throwaway kit holds only the new level, so it is level 1 there (selfcheck wants 1, 2, 3...).
    entry.update(number=1, folder="exercises/level1", solution="solutions/level1")
    shutil.copy(TEMPLATE / "level_module.py", root / "grader" / "levels" / "toy.py")
    starter, solution = root / entry["folder"], root / entry["solution"]
    starter.mkdir(parents=True)
    solution.mkdir(parents=True)
    shutil.copy(TEMPLATE / "starter.py", starter / "agent.py")
    shutil.copy(TEMPLATE / "solution.py", solution / "agent.py")
    shutil.copy(TEMPLATE / "test_level.py", starter / "test_agent.py")
    shutil.copy(TEMPLATE / "README.md", starter / "README.md")
    shutil.copy(TEMPLATE / "hints.md", starter / "hints.md")
    (root / "exercises" / "manifest.json").write_text(json.dumps({"version": 1, "levels": [entry]}))
    return root


def crashcourse(root: Path, *args: str) -> subprocess.CompletedProcess:
    # `python -m grader` from the kit's root imports the kit's own copy of grader/ (the current
    # folder comes first on sys.path), as a maintainer's clone would.
    env = {k: v for k, v in os.environ.items() if k not in ("CRASHCOURSE_ROOT", "PYTHONPATH")}
    env.update(NO_COLOR="1", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-m", "grader", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_copy_runs_its_own_grader(toy_kit):
    where = subprocess.run([sys.executable, "-c", "import grader.levels.toy as t; print(t.__file__)"],
                           cwd=toy_kit, capture_output=True, text=True, timeout=60)
    assert Path(where.stdout.strip()).resolve() == (toy_kit / "grader" / "levels" / "toy.py").resolve(), where.stderr


def test_selfcheck_holds_the_new_level_to_its_plant(toy_kit):
    # --no-tests: check and grade below run the level's tests; here the plant, the hints and the
    # manifest are what is checked.
    done = crashcourse(toy_kit, "selfcheck", "--no-tests")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "level 1: starter breaks PARSE; solution clean" in done.stdout


def test_demo_draws_the_new_levels_matrix(toy_kit):
    done = crashcourse(toy_kit, "demo")
    assert done.returncode == 0, done.stderr
    assert "Level 1: A toy level made from the template" in done.stdout
    assert "Each row: your loop killed at that point (crash models M1, M2)" in done.stdout
    assert "torn file" in done.stdout and "all 0 crash states" not in done.stdout


def test_check_grades_the_starter_with_the_new_levels_tests(toy_kit):
    done = crashcourse(toy_kit, "check", "1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "PARSE broken" in done.stdout
    assert "test_a_crash_mid_save_never_leaves_half_a_file" in done.stdout


def test_grade_scores_the_new_level_and_counts_its_checks(toy_kit, tmp_path):
    subs = tmp_path / "subs"
    for name, source in (("starter", "exercises/level1"), ("solution", "solutions/level1")):
        (subs / name).mkdir(parents=True)
        shutil.copy(toy_kit / source / "agent.py", subs / name / "agent.py")
    out = tmp_path / "report.md"
    done = crashcourse(toy_kit, "grade", str(subs), "--level", "1", "--examples", "1", "--format", "md",
                       "--output", str(out), "--no-progress")
    assert out.exists(), done.stderr[-2000:]
    report = out.read_text()
    assert "| solution | passed | 2 / 2 |" in report and "| starter | failed | 1 / 2 |" in report, report
    assert "| PARSE | 1 (50%) |" in report, report
