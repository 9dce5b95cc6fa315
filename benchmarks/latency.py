"""How long a learner waits for `pytest exercises/levelN`, against a one-test pytest run.

    python benchmarks/latency.py                  # every level, starter and solution, bytecode off then on
    python benchmarks/latency.py --levels 2 6     # some levels only
    python benchmarks/latency.py --repeat 3       # best of 3 for every figure (slower, steadier)
    python benchmarks/latency.py --no-hang        # leave out the stuck-loop timings
    python benchmarks/latency.py --watch          # `crashcourse watch`: seconds from a save to its verdict

For each level it times, in one process per run as a learner gets it:

* ``pytest exercises/levelN`` on the starter and on the solution (``--submission solutions/levelN``);
* a pytest run of one empty test in the same venv, the baseline: interpreter start, pytest, and
  every plugin the venv installs (the kit's and Hypothesis's);
* the ratio of the two, which is the figure that matters (target: at most 2);
* with ``--hang`` (the default), a copy of the solution whose function spins forever, run with the
  default loop limit: the time until pytest has reported it and stopped (budget: under 10 s).

Every run is timed twice over: with bytecode caching **off** (``PYTHONDONTWRITEBYTECODE=1``, as this
machine sets it: nothing compiled in this run is kept, and pytest re-rewrites the asserts of
plugin modules it cannot cache) and **on** (the variable unset, after one untimed run has warmed
``__pycache__``: what a learner has). Off is timed first, since the on runs leave caches behind
that off runs then read. The baseline is re-measured beside each level and the ratio uses the
baseline next to it, so a machine that gets busier part-way through skews both sides alike. The
three runs of a level are timed turn about (baseline, starter, solution, then again), each figure
the best of its ``--repeat`` runs, so a moment when the machine runs slow falls on all three. The
last two columns are the median, over the rounds, of each round's starter and solution time over
that round's baseline: three runs seconds apart, which a drift in the machine's speed moves least.
The target (at most 2, bytecode caching on) is judged on those paired medians; the best-of ratios
beside them can pair a baseline from a fast moment with a level's runs from a slow one.
The load average at the start and end is printed: on a shared machine, compare ratios only.
Beside the wall-clock ratios, the CPU time of each pytest process (user + sys, best of the runs)
gives a second pair of ratios, less moved by other processes waiting for the same cores.
"""

from __future__ import annotations

import argparse
import os
import resource
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from test_hang import spinning_copy  # noqa: E402 - the lead's way of making a stuck copy

HANG_CASES = {1: ("checkpoint.py", "save_checkpoint"), 2: ("agent.py", "save_checkpoint"),
              3: ("agent.py", "save_checkpoint"), 4: ("resume.py", "resume_agent"),
              5: ("agent.py", "save_checkpoint"), 6: ("agent.py", "run_agent")}


def _env(bytecode: bool) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


_CPU = [float("inf")]  # the best CPU time (user + sys) of the runs timed() measured last


def timed(args: list, env: dict, repeat: int) -> float:
    """Best wall-clock time of ``repeat`` runs of ``python -m pytest ARGS`` from the kit's root
    (their best CPU time is left in ``_CPU[0]``)."""
    best, cpu = float("inf"), float("inf")
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider"], cwd=ROOT, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = min(cpu, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    _CPU[0] = cpu
    return best


def hang_seconds(level: int, env: dict, workdir: Path) -> float:
    filename, function = HANG_CASES[level]
    target = workdir / f"hang{level}"
    target.mkdir()
    spinning_copy(level, filename, function, target)
    return timed([f"exercises/level{level}", "--submission", str(target)], env, 1)


def _read_until_verdict(proc: subprocess.Popen, timeout: float = 300) -> bool:
    """Read ``watch``'s output until it says it is watching again (its check is printed in full)."""
    buf, end = b"", time.monotonic() + timeout
    while time.monotonic() < end:
        if select.select([proc.stdout], [], [], 1)[0]:
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            if not chunk:
                return False
            buf += chunk
            if b"Ctrl-C to stop" in buf:
                return True
    return False


def watch_seconds(level: int, source: Path, env: dict, workdir: Path, saves: int) -> tuple[float, list]:
    """``crashcourse watch N --path COPY`` of ``source``'s files: (seconds to the first verdict, the seconds
    from each of ``saves`` saves to its verdict). A save appends a comment to the level's first file."""
    target = workdir / f"watch{level}-{source.parent.name}"
    target.mkdir()
    for path in source.glob("*.py"):
        if not path.name.startswith("test_"):
            shutil.copy(path, target / path.name)
    edited = sorted(target.glob("*.py"))[0]
    proc = subprocess.Popen([sys.executable, "-m", "grader", "watch", str(level), "--path", str(target)], cwd=ROOT,
                            env=dict(env, NO_COLOR="1"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        start = time.perf_counter()
        _read_until_verdict(proc)
        first, after = time.perf_counter() - start, []
        for i in range(saves):
            time.sleep(0.3)
            with open(edited, "a", encoding="utf-8") as f:
                f.write(f"\n# saved again ({i})\n")
            start = time.perf_counter()
            _read_until_verdict(proc)
            after.append(time.perf_counter() - start)
        return first, after
    finally:
        proc.kill()
        proc.wait()


def check_hang_seconds(level: int, env: dict, workdir: Path) -> float:
    """``crashcourse check N`` on a copy of the solution whose function spins: until the verdict is printed."""
    filename, function = HANG_CASES[level]
    target = workdir / f"checkhang{level}"
    target.mkdir()
    spinning_copy(level, filename, function, target)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "grader", "check", str(level), "--path", str(target)], cwd=ROOT, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def watch_main(args: argparse.Namespace) -> int:
    """The ``--watch`` table: each level's starter and solution under ``watch``, beside two baselines."""
    print(f"watch benchmark: {sys.executable}, {os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.1f}, "
          f"{args.saves} saves per file")
    with tempfile.TemporaryDirectory(prefix="crashcourse-watch-") as tmp:
        one = Path(tmp) / "test_one.py"
        one.write_text("def test_one():\n    assert True\n")
        for mode in args.modes:
            env = _env(mode == "on")
            if mode == "on":
                timed([str(one)], env, 1)
            bare = timed([str(one)], dict(env, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"), 3)
            plain = timed([str(one)], env, 3)
            print(f"\nbytecode caching {mode.upper()}: one-test pytest {plain:.2f} s, with plugin autoloading off "
                  f"{bare:.2f} s")
            print(f"{'level':<6} {'starter first':>13} {'after a save':>12} {'solution first':>14} {'after a save':>12}"
                  f" {'check, stuck s':>14}")
            for level in args.levels:
                work = Path(tmp) / f"{mode}{level}"
                work.mkdir()
                row = []
                for source in (ROOT / "exercises" / f"level{level}", ROOT / "solutions" / f"level{level}"):
                    first, after = watch_seconds(level, source, env, work, args.saves)
                    row += [first, statistics.median(after)]
                stuck = check_hang_seconds(level, env, work) if args.hang else float("nan")
                print(f"{level:<6} {row[0]:>13.2f} {row[1]:>12.2f} {row[2]:>14.2f} {row[3]:>12.2f} {stuck:>14.2f}")
    print(f"\nload average at end {os.getloadavg()[0]:.1f}; target: a verdict within 1 s of a save (median)")
    return 0


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", type=int, nargs="*", default=[1, 2, 3, 4, 5, 6])
    parser.add_argument("--repeat", type=int, default=1, help="best of N for every figure (default 1)")
    parser.add_argument("--no-hang", dest="hang", action="store_false", help="skip the stuck-loop timings")
    parser.add_argument("--watch", action="store_true", help="time `crashcourse watch` from a save to its verdict")
    parser.add_argument("--saves", type=int, default=3, help="saves per file with --watch (the median is shown)")
    parser.add_argument("--modes", nargs="*", default=["off", "on"], choices=["off", "on"],
                        help="bytecode caching modes to time, in this order (default: off on)")
    args = parser.parse_args(argv)
    if args.watch:
        return watch_main(args)
    print(f"latency benchmark: {sys.executable} (Python {sys.version.split()[0]}), {os.cpu_count()} cores, "
          f"load average at start {os.getloadavg()[0]:.1f}, best of {args.repeat}")
    failures = 0
    with tempfile.TemporaryDirectory(prefix="crashcourse-latency-") as tmp:
        tmp = Path(tmp)
        (tmp / "one").mkdir()
        one = tmp / "one" / "test_one.py"
        one.write_text("def test_one():\n    assert True\n")
        for mode in args.modes:
            env = _env(mode == "on")
            if mode == "on":  # a learner's second run: __pycache__ (and pytest's rewritten copies) are warm
                timed([str(one)], env, 1)
                for level in args.levels:
                    timed([f"exercises/level{level}"], env, 1)
                    timed([f"exercises/level{level}", "--submission", f"solutions/level{level}"], env, 1)
            print(f"\nbytecode caching {mode.upper()}"
                  + (" (PYTHONDONTWRITEBYTECODE unset, caches warm)" if mode == "on" else
                     " (PYTHONDONTWRITEBYTECODE=1)"))
            print(f"{'level':<6} {'one test s':>10} {'starter s':>10} {'ratio':>6} {'solution s':>11} {'ratio':>6}"
                  f" {'cpu ratios':>11} {'paired ratios':>12}" + (f" {'stuck loop s':>13}" if args.hang else ""))
            baselines = []
            for level in args.levels:
                # Turn about: baseline, starter, solution, then again. This machine's speed drifts over
                # seconds, and three back-to-back blocks of runs would each catch a different moment.
                best = {"base": [float("inf")] * 2, "starter": [float("inf")] * 2, "solution": [float("inf")] * 2}
                runs = {"base": [str(one)], "starter": [f"exercises/level{level}"],
                        "solution": [f"exercises/level{level}", "--submission", f"solutions/level{level}"]}
                paired: dict = {"starter": [], "solution": []}
                for _ in range(args.repeat):
                    walls = {}
                    for name, run_args in runs.items():
                        walls[name] = wall = timed(run_args, env, 1)
                        best[name] = [min(best[name][0], wall), min(best[name][1], _CPU[0])]
                    for name in paired:
                        paired[name].append(walls[name] / walls["base"])
                (base, base_cpu), (starter, starter_cpu), (solution, solution_cpu) = \
                    best["base"], best["starter"], best["solution"]
                baselines.append(base)
                starter_paired, solution_paired = (statistics.median(paired[n]) for n in ("starter", "solution"))
                line = (f"{level:<6} {base:>10.2f} {starter:>10.2f} {starter / base:>6.2f} {solution:>11.2f} "
                        f"{solution / base:>6.2f} {starter_cpu / base_cpu:>5.2f} {solution_cpu / base_cpu:>5.2f}"
                        f" {starter_paired:>6.2f} {solution_paired:>5.2f}")
                if mode == "on":
                    failures += (starter_paired > 2) + (solution_paired > 2)
                if args.hang:
                    (tmp / mode).mkdir(exist_ok=True)
                    stuck = hang_seconds(level, env, tmp / mode)
                    line += f" {stuck:>13.2f}" + ("" if stuck < 10 else "  OVER 10 s")
                    failures += stuck >= 10
                print(line)
            print(f"baseline spread: {min(baselines):.2f} to {max(baselines):.2f} s "
                  f"(median {statistics.median(baselines):.2f})")
    print(f"\nload average at end {os.getloadavg()[0]:.1f}")
    print("target met: every paired ratio with bytecode on at most 2, every stuck loop under 10 s" if not failures else
          f"target missed {failures} time(s): see the rows above")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
