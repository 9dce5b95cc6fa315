"""Every re-run line works when pasted where the learner ran the command: pytest run from another
folder than the kit's (its node ids are relative to the rootdir, not to there), a submission folder
with a space in its name, and `crashcourse check N --path DIR` from inside a workspace's folder."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
WRONG = KIT / "tests" / "corpus" / "level2" / "w16_no_final_save.py"
WRONG6 = KIT / "tests" / "corpus" / "level6" / "wrong" / "loader_applies_a_torn_saves_complete_lines.py"


def _run(argv: list, cwd: Path) -> str:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", COLUMNS="200")
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    return done.stdout + done.stderr


def _rerun_line(out: str) -> list:
    line = next(line for line in out.splitlines() if "Re-run just this" in line)
    words = shlex.split(line.split(": ", 1)[1])
    assert words[0] == "pytest", line
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *words[1:]]


def _pasted(argv: list, cwd: Path) -> None:
    out = _run(argv, cwd)
    assert "not found" not in out and "no tests ran" not in out, out[-2000:]
    assert "1 failed" in out, out[-2000:]


def test_a_pytest_re_run_line_works_from_the_folder_pytest_ran_in(tmp_path):
    (tmp_path / "my copy").mkdir()
    shutil.copy(WRONG, tmp_path / "my copy" / "agent.py")
    out = _run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-x", str(KIT / "exercises" / "level2"),
                "--submission", "my copy"], tmp_path)
    _pasted(_rerun_line(out), tmp_path)


def test_a_check_re_run_line_works_from_inside_a_workspace(tmp_path):
    _run([sys.executable, "-m", "grader", "init", str(tmp_path / "ws"), "--levels", "6"], tmp_path)
    (tmp_path / "ws" / "mine").mkdir()
    shutil.copy(WRONG6, tmp_path / "ws" / "mine" / "agent.py")
    here = tmp_path / "ws" / "exercises"
    out = _run([sys.executable, "-m", "grader", "check", "6", "--path", "../mine"], here)
    _pasted(_rerun_line(out), here)
