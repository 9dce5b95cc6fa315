"""Verdicts shared between runs of the same conversation are the verdicts a fresh check gives.

``crashcourse grade`` checks the kit's solution before it forks its judges, and a student's run of
the same conversation then looks verdicts up instead of computing them (see
``grader.engine.explore.shared_verdicts``). Every wrong submission of the level-2 corpus must get exactly
the findings it gets with nothing shared.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import pytest

from grader.engine import explore
from grader.engine.conversations import generated
from grader.engine.scripted import support_tickets
from grader.engine.loader import import_file

KIT = Path(__file__).resolve().parent.parent
WRONG = sorted((KIT / "tests" / "corpus" / "level2").glob("w*.py")) + [KIT / "exercises" / "level2" / "agent.py"]
SCENARIOS = [support_tickets(3)] + generated(3, 3)


def _load(path: Path):
    return import_file(path, "shared").run_agent


def _findings(run, work: Path) -> list:
    out = []
    for scenario in SCENARIOS:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()  # the same folder every time: a finding may name it
        found = explore.explore_loop(run, scenario, models=("M1", "M2"), workdir=str(work),
                                     directory=explore.NESTED_FOLDER, rerun=scenario is SCENARIOS[0])
        # tempfile's random names (an EXDEV error names the temp file) are no part of a verdict.
        temp = re.escape(tempfile.gettempdir())
        error = re.sub(temp + r"/[^']*'", "<temp file>'", found.error) if found.error else found.error
        # A route the recorder cannot follow (mmap) is refused as unseen: a finding too.
        # So are the random names of tempfile's own temp files (NamedTemporaryFile) that a detail quotes.
        out.append((error, [(v.invariant, v.model, v.point, re.sub(r"\btmp[a-z0-9_]{8}\b", "tmp<random>", v.detail))
                            for v in found.violations], list(found.unseen)))
    return out


@pytest.mark.parametrize("path", WRONG, ids=[p.stem for p in WRONG])
def test_a_wrong_submission_gets_the_same_findings_after_the_solution_was_checked(path, monkeypatch, tmp_path):
    work = tmp_path / "work"
    monkeypatch.setattr(explore, "_VERDICTS", {})
    fresh = _findings(_load(path), work)
    assert any(error or violations or unseen for error, violations, unseen in fresh), \
        "a wrong submission should fail somewhere"
    monkeypatch.setattr(explore, "_VERDICTS", {})
    _findings(_load(KIT / "solutions" / "level2" / "agent.py"), work)
    assert sum(len(v) for v in explore._VERDICTS.values()) > 0, "the solution's verdicts should be shared"
    assert _findings(_load(path), work) == fresh
