"""``crashcourse grade`` gives every level's shipped solution full marks through the sandbox.

For each level of the manifest, one run grades the shipped solution; it must earn full marks. (Checks
that change the test process itself, or module values such as MAX_TURNS, have to be carried across
to the sandboxed worker; a level where that went wrong showed up here.) That the starter gets from
``grade`` exactly the verdicts its own ``pytest exercises/levelN`` gives is held, for every level,
by tests/test_one_verdict.py, with every other face beside them.
"""

from __future__ import annotations

import concurrent.futures
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.grading import bubblewrap
from grader.levels import manifest

KIT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.bubblewrap  # see tests/conftest.py: SYSTEM_MARKERS
LEVELS = manifest.load().levels
EXAMPLES = "2"


def _copy_files(source: Path, names: list, target: Path) -> None:
    target.mkdir(parents=True)
    for name in names:
        if (source / name).exists():
            shutil.copy(source / name, target / name)


def _grade(level, tmp: Path, env: dict) -> dict:
    subs = tmp / f"level{level.number}"
    files = list(level.files) + ([level.answers] if level.answers else [])
    _copy_files(KIT / level.solution, files, subs / "solution")
    report = tmp / f"report{level.number}.json"
    graded = subprocess.run([sys.executable, "-m", "grader", "grade", str(subs), "--level", str(level.number),
                             "--examples", EXAMPLES, "--output", str(report)]
                            + ([] if bubblewrap.check() is None else ["--no-box"]),  # the verdicts, boxed or not
                            capture_output=True, text=True, cwd=KIT, timeout=600, env=env)
    return {"graded": graded, "report": json.loads(report.read_text()) if report.exists() else None}


@pytest.fixture(scope="module")
def results(request, tmp_path_factory, grading_env):
    """The grading of each level a selected test asks for, two at a time: `-k level6` grades level 6 alone."""
    tmp = tmp_path_factory.mktemp("levels")
    env = grading_env(tmp / "grading-tmp")  # the grading runs' own temp folder (TMPDIR)
    wanted = {item.callspec.params["number"] for item in getattr(request.session, "items", [])
              if item.module is request.module and "number" in getattr(getattr(item, "callspec", None), "params", {})}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = {level.number: pool.submit(_grade, level, tmp, env) for level in LEVELS
                   if level.number in wanted}
        return {number: future.result() for number, future in futures.items()}


@pytest.mark.parametrize("number", [level.number for level in LEVELS], ids=lambda n: f"level{n}")
def test_the_solution_earns_full_marks_through_the_sandbox(results, number):
    got = results[number]
    assert got["report"] is not None, got["graded"].stderr[-3000:]
    solution = {s["id"]: s for s in got["report"]["submissions"]}["solution"]
    failing = {t["name"]: t["output"][:600] for t in solution["tests"] if t["status"] not in ("passed", "manual review")}
    assert solution["status"] == "passed" and solution["score"] == solution["max_score"] > 0, failing
