"""What one worker's interpreter start costs, with and without what a plain run has.

A box's worker starts as ``python -c "<put the kit on the path; import the worker>"``. This times
that start three ways, taking turns so that load hits each alike: with ``-S`` (no ``site``: what
the worker did until the sixth session), without it (what it does now: ``sys.flags`` as in any run),
and without it and importing pytest too (what making ``"pytest" in sys.modules`` true would cost).
Prints the medians and each against the first, in the same run.

    python benchmarks/worker_start.py [--runs 40]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

KIT_PARENT = str(Path(__file__).resolve().parents[1])
START = (f"import sys, site; sys.path[:] = [{KIT_PARENT!r}] + [p for p in sys.path if p] "
         "+ [p for p in site.getsitepackages() if p not in sys.path]; import grader.grading.worker")
WAYS = {
    "-S (before)": [sys.executable, "-S", "-c", START],
    "no flag (now)": [sys.executable, "-c", START],
    "no flag + import pytest": [sys.executable, "-c", START + "; import pytest"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"}
    times: dict = {name: [] for name in WAYS}
    for _ in range(args.runs):
        for name, argv in WAYS.items():
            started = time.perf_counter()
            subprocess.run(argv, env=env, check=True, cwd="/")
            times[name].append(time.perf_counter() - started)
    base = statistics.median(times["-S (before)"])
    print(f"load average at the end: {os.getloadavg()[0]:.1f}; {args.runs} runs each, taking turns")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:26} median {median * 1000:6.1f} ms  best {min(values) * 1000:6.1f} ms  "
              f"{median / base:.2f} x the first")


if __name__ == "__main__":
    main()
