"""A new level, made from a template as CONTRIBUTING.md says, works with every command.

For each template (``templates/level``: a loop crashed at every point; ``templates/named-checks``:
a level with checks, cell words and causes of its own), the test builds a throwaway kit in a temp
folder: a copy of grader/ as it is, the template's level module saved where its manifest entry
says, the template's starter, solution, tests, README and hints in their folders, and a manifest
holding the template's entry. Nothing else is edited. Then selfcheck, demo, check, hint, run and
grade run there, on the starter and on the solution, as a maintainer would run them.
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
TEMPLATES = KIT / "templates"


def build(root: Path, template: Path) -> dict:
    """A kit in ``root`` holding only the template's level, as CONTRIBUTING's steps make it."""
    shutil.copytree(KIT / "grader", root / "grader", ignore=shutil.ignore_patterns("__pycache__"))
    entry = json.loads((template / "manifest_entry.json").read_text())
    # The throwaway kit holds only the new level, so it is level 1 there (selfcheck wants 1, 2, 3...).
    entry.update(number=1, folder="exercises/level1", solution="solutions/level1")
    shutil.copy(template / "level_module.py", root / (entry["module"].replace(".", "/") + ".py"))
    starter, solution = root / entry["folder"], root / entry["solution"]
    starter.mkdir(parents=True)
    solution.mkdir(parents=True)
    shutil.copy(template / "starter.py", starter / entry["files"][0])
    shutil.copy(template / "solution.py", solution / entry["files"][0])
    shutil.copy(template / "test_level.py", starter / entry["tests"][0])
    shutil.copy(template / "README.md", starter / "README.md")
    shutil.copy(template / "hints.md", starter / "hints.md")
    (root / "exercises" / "manifest.json").write_text(json.dumps({"version": 1, "levels": [entry]}))
    return entry


@pytest.fixture(scope="module", params=["level", "named-checks"])
def toy(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"toykit-{request.param}")
    return request.param, root, build(root, TEMPLATES / request.param)


# What each template's level shows: its words, the planted check's cell, the first failing task.
EXPECT = {
    "level": {"title": "A toy level made from the template", "words": "Each row: your loop killed at that point "
              "(crash models M1, M2)", "cell": "torn file", "story": "PARSE broken",
              "first_test": "test_a_crash_mid_save_never_leaves_half_a_file", "failing_task": 1,
              "points": ("1 / 2", "2 / 2"), "summary": "crash states",
              "passes": "Level 1 passes: every test, and every crash state in the matrix.",
              "legend": "What a resume would find:"},
    "named-checks": {"title": "A toy level with named checks", "words": "Each row saves with this checkpoint.py "
                     "and loads it back", "cell": "raises on no file",
                     "story": "Loaded from a folder where nothing had been saved yet.",
                     "first_test": "test_a_folder_with_no_checkpoint_loads_as_none", "failing_task": 2,
                     "points": ("2 / 3", "3 / 3"), "summary": "1 of 2 checks fail (no-file)",
                     "passes": "Level 1 passes: every test, and every check of save and load in the matrix.",
                     "legend": "What each check found:"},
}


def crashcourse(root: Path, *args: str) -> subprocess.CompletedProcess:
    # `python -m grader` from the kit's root imports the kit's own copy of grader/ (the current
    # folder comes first on sys.path), as a maintainer's clone would.
    env = {k: v for k, v in os.environ.items() if k not in ("CRASHCOURSE_ROOT", "PYTHONPATH")}
    env.update(NO_COLOR="1", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-m", "grader", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_copy_runs_its_own_grader(toy):
    _, root, entry = toy
    where = subprocess.run([sys.executable, "-c", f"import {entry['module']} as t; print(t.__file__)"],
                           cwd=root, capture_output=True, text=True, timeout=60)
    assert Path(where.stdout.strip()).resolve() == (root / (entry["module"].replace(".", "/") + ".py")).resolve(), \
        where.stderr


def test_selfcheck_holds_the_new_level_to_its_plant_its_hints_and_its_tests(toy):
    _, root, entry = toy
    done = crashcourse(root, "selfcheck")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"level 1: starter breaks {', '.join(entry['planted'])}; solution clean" in done.stdout
    assert "level 1: starter tests fail as they should" in done.stdout and "level 1: solution tests pass" in done.stdout


def test_demo_draws_the_new_levels_matrix_in_its_own_words(toy):
    name, root, _ = toy
    done = crashcourse(root, "demo")
    assert done.returncode == 0, done.stderr
    want = EXPECT[name]
    assert f"Level 1: {want['title']}" in done.stdout and want["words"] in done.stdout
    assert want["cell"] in done.stdout and "all 0 crash states" not in done.stdout
    assert want["summary"] in done.stdout, done.stdout
    assert want["legend"] in done.stdout, done.stdout  # the legend headed in the level's words


def test_check_fails_the_starter_with_the_first_failure_in_full(toy):
    name, root, _ = toy
    done = crashcourse(root, "check", "1")
    assert done.returncode == 1, done.stdout + done.stderr
    want = EXPECT[name]
    assert want["story"] in done.stdout and want["first_test"] in done.stdout
    assert f"task {want['failing_task']} is the first still failing" in done.stdout, done.stdout


def test_check_passes_the_solution(toy):
    name, root, _ = toy
    done = crashcourse(root, "check", "1", "--path", "solutions/level1")
    assert done.returncode == 0, done.stdout + done.stderr
    # In the level's own words: a loop's crash states, or the checks a level with named checks declares.
    assert EXPECT[name]["passes"] in done.stdout, done.stdout


def test_hint_leads_the_starter_to_its_failing_task_and_has_nothing_for_the_solution(toy, tmp_path):
    name, shared, _ = toy
    # A copy of its own, with nothing remembered: hint reads what the last check left in .crashcourse/
    # of the folder it runs from, and the check tests above may have run in the shared kit or not
    # (a -k selection, another worker). With no check remembered, hint runs the level's tests itself.
    root = tmp_path / "kit"
    shutil.copytree(shared, root, ignore=shutil.ignore_patterns(".crashcourse"))
    task = EXPECT[name]["failing_task"]
    done = crashcourse(root, "hint", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Level 1, task {task}:" in done.stdout and "A question:" in done.stdout
    if name == "named-checks":  # its own cause, declared by its module, says why this task
        assert "Why this task: in the last check, load_checkpoint raises when the folder holds no" in done.stdout
    done = crashcourse(root, "hint", "1", "--path", "solutions/level1")
    assert done.returncode == 0 and "Every test of level 1 passes" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("which", ["exercises/level1", "solutions/level1"])
def test_run_drives_the_levels_file_or_says_it_cannot(toy, which, tmp_path):
    name, root, _ = toy
    done = crashcourse(root, "run", "1", "--path", which, "--directory", str(tmp_path / "run"))
    if name == "level":
        # A loop level: the scripted task runs, and what it left on disk is shown.
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Checkpoint left on disk:" in done.stdout
    else:
        assert done.returncode == 2, done.stdout + done.stderr
        assert "Level 1's file has no loop to drive (it grades save_checkpoint)" in done.stdout
        assert "works on no level of this kit" in done.stdout


@pytest.mark.bubblewrap  # grades through crashcourse grade's box (tests/conftest.py: SYSTEM_MARKERS)
def test_grade_scores_the_new_level_and_counts_its_checks(toy, tmp_path):
    name, root, entry = toy
    subs = tmp_path / "subs"
    filename = entry["files"][0]
    for who, source in (("starter", "exercises/level1"), ("solution", "solutions/level1")):
        (subs / who).mkdir(parents=True)
        shutil.copy(root / source / filename, subs / who / filename)
    out = tmp_path / "report.md"
    done = crashcourse(root, "grade", str(subs), "--level", "1", "--examples", "1", "--format", "md",
                       "--output", str(out), "--no-progress")
    assert out.exists(), done.stderr[-2000:]
    report = out.read_text()
    starter_points, solution_points = EXPECT[name]["points"]
    assert f"| solution | passed | {solution_points} |" in report, report
    assert f"| starter | failed | {starter_points} |" in report, report
    planted = entry["planted"][0]
    assert f"| {planted} | 1 (50%) |" in report, report
