"""Generated conversations are the same for a seed wherever they are drawn.

The grader draws them before any submission is loaded; a student's ``pytest exercises/level2``
draws them after the student's file is imported. If what happened to be imported changed the
draws, a failure's re-run command would run other conversations than the ones that failed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent

DRAW = """
import hashlib, pickle, sys
sys.path.insert(0, {kit!r})
{before}
from grader.engine.conversations import generated
import grader.levels.parallel_calls  # registers level 5's "parallel" conversations
drawn = generated(7, 6) + generated(7, 6, "parallel")
print(hashlib.sha256(pickle.dumps([(s.task, s.responses, s.results) for s in drawn])).hexdigest())
"""

# A local module full of literals: recent Hypothesis versions like to reuse constants from the
# source of modules that are already imported, which is what made draws depend on context.
LITERALS = "WORDS = [" + ", ".join(repr(f"literal-{i}-ünï") for i in range(300)) + "]\n" + \
    "NUMBERS = [" + ", ".join(str(7919 * i) for i in range(300)) + "]\n"


def _digest(before: str, cwd: Path) -> str:
    code = DRAW.format(kit=str(KIT), before=before)
    # The draws themselves are compared, so none of them may come from the on-disk cache.
    env = dict(os.environ, CRASHCOURSE_DRAW_CACHE="off")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=120,
                          env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-1]


def test_the_same_seed_draws_the_same_conversations_whatever_was_imported_first(tmp_path):
    (tmp_path / "student_code.py").write_text(LITERALS)
    plain = _digest("", tmp_path)
    after_student_code = _digest("sys.path.insert(0, '.'); import student_code", tmp_path)
    after_pytest = _digest("import pytest; pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', "
                           f"{str(KIT / 'exercises' / 'level2')!r}])", tmp_path)
    assert plain == after_student_code == after_pytest


def test_the_grader_draws_ahead_only_the_lists_a_level_asks_for(tmp_path):
    from grader.engine.conversations import draws_in

    assert draws_in(sorted((KIT / "exercises" / "level4").glob("test_*.py"))) == [("conversations", {"max_turns": 4})]
    assert draws_in(sorted((KIT / "exercises" / "level5").glob("test_*.py"))) == [("parallel", {})]
    unclear = tmp_path / "test_x.py"
    unclear.write_text("KIND = 'parallel'\ndef test_x(seed):\n    generated(seed, 3, KIND)\n")
    assert draws_in([unclear]) is None, "a kind it cannot read means: draw every list"
