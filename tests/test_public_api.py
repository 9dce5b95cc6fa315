"""The public API: what the README offers, importable from ``grader`` itself, and nothing heavier."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grader
from grader.engine.explore import FileCrashes, explore_writes
from grader.grading.reports import contract

KIT = Path(__file__).resolve().parent.parent


def test_every_public_name_resolves_to_the_thing_the_readme_describes():
    assert sorted(grader.__all__) == sorted(["FileCrashes", "crash_explorer", "explore_writes", "report_contract",
                                             "__version__"])
    for name in grader.__all__:
        assert getattr(grader, name) is not None, name
    assert grader.explore_writes is explore_writes and grader.FileCrashes is FileCrashes
    assert grader.report_contract is contract
    assert grader.crash_explorer.__name__ == "crash_explorer"  # the fixture the plugin registers
    assert set(grader.__all__) <= set(dir(grader))


def test_the_report_contract_keeps_exactly_the_documented_keys():
    batch = {"level": 2, "notes": ["kept out"], "submissions": [
        {"id": "alice", "score": 1, "max_score": 2, "status": "failed", "error": None, "stdout": "kept out",
         "tests": [{"name": "t", "status": "failed", "score": 0, "max_score": 2, "output": "", "reason": "hung",
                    "task": 1}]}]}
    got = grader.report_contract(batch)
    assert set(got) == {"level", "submissions"}
    assert set(got["submissions"][0]) == {"id", "score", "max_score", "status", "error", "tests"}
    assert got["submissions"][0]["tests"] == [{"name": "t", "status": "failed", "score": 0.0, "max_score": 2.0,
                                              "output": "hung"}]


def test_importing_grader_imports_no_pytest_and_no_engine():
    code = ("import sys, grader; print(sorted(m for m in ('pytest', 'hypothesis', 'grader.engine.explore') "
            "if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=KIT, timeout=60)
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_an_unknown_name_is_an_attribute_error():
    try:
        grader.not_a_thing  # noqa: B018
    except AttributeError as exc:
        assert "not_a_thing" in str(exc)
    else:
        raise AssertionError("grader.not_a_thing should not exist")
