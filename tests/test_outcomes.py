"""One outcome collector and one loader: every face reads a test run and a failed import the same way."""

from __future__ import annotations

import json

import pytest

from grader.engine import loader
from grader.faces.student.testrun import ReportFile
from grader.grading import judge
from grader.grading.outcomes import Outcomes

SCORED = """
import pytest

@pytest.fixture
def broken():
    raise RuntimeError("no fixture today")

@pytest.fixture
def messy():
    yield
    raise RuntimeError("left a mess")

@pytest.mark.points(2)
@pytest.mark.task(taskno=1)
def test_two():
    pass

@pytest.mark.points
@pytest.mark.task(2)
def test_bare():
    pass

@pytest.mark.points(3)
def test_fails():
    assert False, "the checkpoint was empty"

def test_unmarked():
    pass

@pytest.mark.points(5)
@pytest.mark.skip(reason="not on this platform")
def test_skipped():
    pass

@pytest.mark.points(1)
def test_setup_breaks(broken):
    pass

@pytest.mark.points(1)
def test_teardown_breaks(messy):
    pass
"""


@pytest.fixture(autouse=True)
def lean(monkeypatch):
    """Only pytest and the kit's plugin in the inner runs (other installed plugins cost seconds each)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


LEAN = ("-p", "grader.faces.plugin", "-p", "no:cacheprovider")


def run(pytester, *plugins):
    pytester.makepyfile(test_scored=SCORED)
    return pytester.runpytest(*LEAN, plugins=list(plugins))


def test_one_rule_for_points_and_status(pytester):
    outcomes = Outcomes()
    run(pytester, outcomes)
    got = {t.name: (t.status, t.points, t.task) for t in outcomes.tests.values()}
    assert got == {"test_two": ("passed", 2.0, 1), "test_bare": ("passed", 1.0, 2), "test_fails": ("failed", 3.0, None),
                   "test_unmarked": ("passed", None, None), "test_skipped": ("skipped", 5.0, None),
                   "test_setup_breaks": ("error", 1.0, None), "test_teardown_breaks": ("error", 1.0, None)}
    assert "the checkpoint was empty" in outcomes.tests["test_scored.py::test_fails"].output
    # skipped and unmarked tests count in no total; a broken setup or teardown earns nothing
    assert outcomes.points() == (3.0, 8.0)


def test_the_plugin_summary_and_the_judge_count_a_bare_marker_alike(pytester):
    result = run(pytester)
    result.stdout.fnmatch_lines(["*crashcourse: 3 of 8 points*"])
    outcomes = Outcomes()
    run(pytester, outcomes)
    entries = {e["name"]: e for e in map(judge.report_entry, outcomes.tests.values())}
    assert entries["test_bare"]["max_score"] == 1.0, "a bare points marker is worth one point in the judge too"
    assert entries["test_unmarked"]["max_score"] == 0.0
    assert entries["test_skipped"]["status"] == "failed" and entries["test_skipped"]["output"].startswith("skipped")


def test_the_students_report_file_carries_the_same_outcomes(pytester, tmp_path):
    path = tmp_path / "report.jsonl"
    run(pytester, ReportFile(str(path)))
    records = {r["nodeid"].split("::")[-1]: r for r in map(json.loads, path.read_text().splitlines())}
    assert records["test_bare"]["points"] == 1.0 and records["test_bare"]["outcome"] == "passed"
    assert records["test_fails"]["outcome"] == "failed" and "the checkpoint was empty" in records["test_fails"]["message"]
    assert records["test_teardown_breaks"]["outcome"] == "error"
    assert len(records) == 7, "one line per test, even when its teardown fails after a pass"


@pytest.mark.parametrize("source, words", [
    ("def f(:\n    pass\n", "agent.py has a syntax error on line 1"),
    ("import sys\nsys.exit(3)\n", "Importing agent.py called sys.exit(3)"),
    ("raise RuntimeError('no config')\n", "Importing agent.py raised RuntimeError: no config [agent.py, line 1"),
])
def test_a_file_that_will_not_import_is_explained_in_one_way(tmp_path, source, words):
    path = tmp_path / "agent.py"
    path.write_text(source)
    with pytest.raises(loader.ImportProblem) as caught:
        loader.load_file(path)
    assert str(caught.value).startswith(words)


def test_the_plugin_reports_a_failed_import_in_the_loaders_words(pytester, tmp_path):
    folder = tmp_path / "student"
    folder.mkdir()
    (folder / "agent.py").write_text("def f(:\n    pass\n")
    pytester.makepyfile(test_load="def test_load(submission):\n    submission.load('agent.py')\n")
    result = pytester.runpytest(*LEAN, "--submission", str(folder))
    result.assert_outcomes(failed=1)
    with pytest.raises(loader.ImportProblem) as caught:
        loader.load_file(folder / "agent.py")
    # The loader's words, with Python's own report of the syntax error below them.
    result.stdout.fnmatch_lines([f"*{str(caught.value).splitlines()[0]}*", '*File "agent.py", line 1*',
                                 "*SyntaxError: *"])


def test_a_plugin_can_hand_out_its_own_submission_through_the_hook(pytester):
    pytester.makeconftest("""
class Fake:
    def __init__(self, folder):
        self.folder = folder

def pytest_crashcourse_submission(config, folder):
    return Fake(folder)
""")
    pytester.makepyfile(test_hook="def test_hook(submission):\n    assert type(submission).__name__ == 'Fake'\n")
    pytester.runpytest(*LEAN).assert_outcomes(passed=1)
