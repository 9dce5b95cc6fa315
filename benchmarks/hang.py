"""How long a learner waits to hear that their code is stuck, on every level and every entry point.

    python benchmarks/hang.py                 # every case, `pytest` and `crashcourse check`
    python benchmarks/hang.py --levels 1 6    # some levels only
    python benchmarks/hang.py --only check    # just `crashcourse check N` (what `watch` re-runs)

Each case copies the level's solution, makes one function spin forever (the same copy as
``tests/test_hang.py`` makes), and times, with the default limit (``CRASHCOURSE_LOOP_TIMEOUT`` unset,
so 5 s), one run of ``pytest exercises/levelN --submission COPY`` and one of ``crashcourse check N
--path COPY``, from start to exit. The budget is 10 s for each. It also says when the first progress
line came, for `check` (the learner sees that after about 2 s). The machine's load average is printed
at the start and the end: on a shared machine, a slow figure beside a high load is the load's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from test_hang import spinning_copy  # noqa: E402 - the same stuck copy the tests make

BUDGET = 10.0
CASES = [(1, "checkpoint.py", "save_checkpoint"), (1, "checkpoint.py", "load_checkpoint"),
         (2, "agent.py", "save_checkpoint"), (3, "agent.py", "save_checkpoint"), (4, "resume.py", "resume_agent"),
         (5, "agent.py", "save_checkpoint"), (6, "agent.py", "run_agent"), (6, "agent.py", "load_checkpoint")]


def timed(command: list, env: dict) -> tuple[float, float]:
    """(seconds until exit, seconds until the first progress line, or -1)."""
    start = time.perf_counter()
    first = -1.0
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        if first < 0 and "has been running for" in line:
            first = time.perf_counter() - start
    proc.wait()
    return time.perf_counter() - start, first


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", type=int, nargs="*", default=None)
    parser.add_argument("--only", choices=("pytest", "check"), default=None)
    args = parser.parse_args()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("CRASHCOURSE_LOOP_TIMEOUT", None)
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    worst = 0.0
    for level, filename, function in CASES:
        if args.levels and level not in args.levels:
            continue
        with tempfile.TemporaryDirectory(prefix="crashcourse-hang-") as folder:
            spinning_copy(level, filename, function, Path(folder))
            runs = {"pytest": [sys.executable, "-m", "pytest", f"exercises/level{level}", "--submission", folder, "-q",
                               "-p", "no:cacheprovider"],
                    "check": [sys.executable, "-m", "grader", "check", str(level), "--path", folder]}
            for name, command in runs.items():
                if args.only and name != args.only:
                    continue
                seconds, first = timed(command, env)
                worst = max(worst, seconds)
                mark = "ok" if seconds < BUDGET else "OVER"
                progress = f", progress line at {first:.1f} s" if first >= 0 else ""
                print(f"level {level} {function:16} {name:7} {seconds:5.1f} s  {mark}{progress}")
    print(f"load average at end: {os.getloadavg()[0]:.2f}; slowest {worst:.1f} s (budget {BUDGET:g} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
