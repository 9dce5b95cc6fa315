"""A loop that never ends is reported once, with the learner's file and line, and the level stops there.

Each case takes the level's solution, makes one of its functions spin forever, and runs the level's
tests on it the way a learner does (``pytest exercises/levelN``), with a one-second limit so the kit's
own suite stays quick. The wall-clock budget (under 10 s with the default limit) is measured by
``benchmarks/latency.py``, not asserted here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# level, the file, the function made to spin
CASES = [(1, "checkpoint.py", "save_checkpoint"), (2, "agent.py", "save_checkpoint"),
         (4, "resume.py", "resume_agent"), (6, "agent.py", "run_agent")]


def spinning_copy(level: int, filename: str, function: str, target: Path) -> int:
    """Copy the level's solution into ``target`` with ``function`` spinning forever; the spin's line."""
    for path in (ROOT / "solutions" / f"level{level}").glob("*.py"):
        shutil.copy(path, target / path.name)
    source = (target / filename).read_text().splitlines()
    start = next(i for i, line in enumerate(source) if line.startswith(f"def {function}("))
    body = start + 1
    while not source[body].rstrip().endswith(("):", ":")) and source[body - 1].rstrip().endswith(","):
        body += 1  # a signature over several lines
    if source[body].strip().startswith(('"""', "'''")):
        quote = source[body].strip()[:3]
        if source[body].strip().count(quote) < 2:
            body += 1
            while quote not in source[body]:
                body += 1
        body += 1
    source[body:body] = ["    while True:", "        pass"]
    (target / filename).write_text("\n".join(source) + "\n")
    return body + 1  # the `while True:` line, counted from 1


@pytest.mark.parametrize("level, filename, function", CASES, ids=[f"level{c[0]}" for c in CASES])
def test_a_hang_is_reported_once_with_its_place(tmp_path, level, filename, function):
    line = spinning_copy(level, filename, function, tmp_path)
    env = dict(os.environ, CRASHCOURSE_LOOP_TIMEOUT="1")
    run = subprocess.run([sys.executable, "-m", "pytest", f"exercises/level{level}", "--submission", str(tmp_path),
                          "-q", "-p", "no:cacheprovider"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=240)
    # The failures section only: the short summary at the end repeats each first line.
    out = run.stdout.split("short test summary info")[0]
    assert run.returncode == 1, run.stdout[-3000:]
    # The limit fired once in the whole run, and its message names the learner's own line.
    assert out.count("was still running after 1 s") == 1, out[-3000:]
    assert f"{filename}, line {line}, in {function}" in out, out[-3000:]
    assert "LoopTimeout" not in out and "grader/" not in out, out[-3000:]
    # Every later test says at once that it did not run the stuck code again.
    failed = int(re.search(r"(\d+) failed", run.stdout).group(1))
    assert failed >= 2
    assert out.count("Not run: the code under test got stuck") >= 1, out[-3000:]
