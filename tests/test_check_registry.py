"""One registry of checks: what the tests record when they fail is what the class report counts.

The ids travel as data (pytest ``user_properties``, then the graded test's ``checks``), so the report
names level 4's own checks with level 4's own words, not the loop invariants that share their ids.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.engine.invariants import INVARIANTS
from grader.faces import assertions
from grader.levels import manifest, registry

KIT = Path(__file__).resolve().parent.parent
pytest_plugins = ("pytester",)


def test_every_engine_invariant_is_declared_once_with_the_engines_words():
    loop = registry.checks("loop")
    assert sorted(c.id for c in loop) == sorted(INVARIANTS)
    assert all(c.words == INVARIANTS[c.id] for c in loop)
    for namespace in registry.namespaces():
        ids = [c.id for c in registry.checks(namespace)]
        assert len(ids) == len(set(ids)), namespace


def test_level_4_shares_ids_with_the_engine_but_not_their_words():
    for check_id in ("PAIRING", "ONCE", "COUNTS", "RESUME"):
        assert registry.check("resume", check_id).words != registry.check("loop", check_id).words
    assert registry.check("loop", "REFUSE") is None and registry.check("resume", "REFUSE") is not None


def test_every_cell_word_of_a_check_has_a_legend_line():
    legend = registry.legend()
    for namespace in registry.namespaces():
        for c in registry.checks(namespace):
            assert not c.cell or c.cell in legend, (namespace, c.id)


def test_a_failure_carries_its_check_ids_and_keeps_its_text():
    with pytest.raises(pytest.fail.Exception) as caught:
        assertions.fail("the story", ["COUNTS", "REFUSE", "COUNTS"], "resume")
    assert str(caught.value) == "the story"
    assert assertions.checks_of(caught.value) == ["resume/COUNTS", "resume/REFUSE"]
    with pytest.raises(AssertionError) as caught:
        with assertions.checking(["CAP"], "resume"):
            assert 1 == 2, "plain assert"
    assert assertions.checks_of(caught.value) == ["resume/CAP"]


def test_the_plugin_copies_the_ids_into_the_report(pytester):
    pytester.makepyfile(test_ids="""
        from grader.faces.assertions import fail

        def test_breaks():
            fail("PARSE broken: the text names one id", ["TRACE"])

        def test_plain():
            assert False, "TRACE broken: text alone records nothing"
    """)
    result = pytester.inline_run("-p", "no:cacheprovider")
    reports = {r.nodeid.split("::")[-1]: dict(r.user_properties)
               for r in result.getreports("pytest_runtest_logreport") if r.when == "call"}
    assert reports["test_breaks"][registry.PROPERTY] == ["loop/TRACE"]
    assert registry.PROPERTY not in reports["test_plain"]


@pytest.mark.bubblewrap  # grades through crashcourse grade's box (tests/conftest.py: SYSTEM_MARKERS)
def test_the_class_report_counts_level_4s_checks_with_level_4s_words(tmp_path):
    """The starter of level 4 is planted to break REFUSE, COUNTS and PAIRING (and its turn cap
    ignores the turns from before the crash): each gets a row, described as level 4 means it."""
    level = manifest.load(KIT).level(4)
    subs = tmp_path / "subs"
    for name, folder in (("starter", level.starter_dir), ("solution", level.solution_dir)):
        (subs / name).mkdir(parents=True)
        for file in level.files:
            shutil.copy(folder / file, subs / name / file)
    out = tmp_path / "report.md"
    graded = subprocess.run([sys.executable, "-m", "grader", "grade", str(subs), "--level", "4", "--examples", "1",
                             "--format", "md", "--output", str(out), "--no-progress"],
                            capture_output=True, text=True, cwd=KIT, timeout=300)
    assert out.exists(), graded.stderr[-2000:]
    md = out.read_text()
    rows = dict(re.findall(r"^\| ([A-Z-]+) \| \d+ \(50%\) \| (.+) \|$", md, re.M))
    assert set(level.planted) <= set(rows), md
    assert rows.keys() <= {c.id for c in registry.checks("resume")}, md
    for check_id, words in rows.items():
        assert words == registry.check("resume", check_id).words


def test_a_new_level_declares_its_own_namespace_and_every_face_reads_it():
    from grader.grading import reports

    ours = [registry.Check("toy-declared", "SHORT", "the file is at most one line", "too long",
                           legend=(("too long", "the file runs past one line (SHORT)"),))]
    registry.declare("toy-declared", ours, (("toy gave up", "the toy level could not run"),))
    registry.declare("toy-declared", ours)  # a second import of the same module changes nothing
    with pytest.raises(ValueError):
        registry.declare("toy-declared", [registry.Check("toy-declared", "OTHER", "something else")])
    with pytest.raises(ValueError):
        registry.declare("loop", [registry.Check("toy-declared", "PARSE", "not the engine's")])
    assert list(registry.legend(["toy-declared"])) == ["too long", "toy gave up"]
    assert "too long" in registry.legend()
    graded = {"name": "t", "status": "failed", "score": 0.0, "max_score": 1.0, "output": "",
              "checks": ["toy-declared/SHORT"]}
    batch = {"level": 7, "submissions": [{"id": "a", "score": 0.0, "max_score": 1.0, "status": "failed",
                                          "error": None, "tests": [graded]}]}
    assert "| SHORT | 1 (100%) | the file is at most one line |" in reports.to_markdown(batch)


def test_a_levels_own_legend_words_win_in_its_own_matrix():
    ours = [registry.Check("toy-ok", "SEALED", "the file carries its seal", "no seal",
                           legend=(("no seal", "the file has no seal (SEALED)"),))]
    registry.declare("toy-ok", ours, (("ok", "the seal matches the messages"),))
    assert registry.legend_for(["toy-ok"])["ok"] == "the seal matches the messages"
    assert registry.legend_for(["loop"])["ok"] == "a resume would carry on correctly"
    # A word the level does not declare is still explained, in the words of the level that does.
    assert registry.legend_for(["toy-ok"])["stuck"] == registry.STUCK_LEGEND
