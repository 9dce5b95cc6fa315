"""Benchmark: ``crashcourse grade`` on 200 level-2 submissions, beside baselines.

    python benchmarks/grading.py [--count 200] [--jobs K] [--examples N] [--mix three|class]

Without ``--jobs`` it grades as ``crashcourse grade`` does by default (``default_jobs``: two per core
on this machine), and times the baselines at that parallelism too; ``--jobs 2`` gives the figures
of earlier sessions.

The submissions are copies of a few real ones (the kit's solution, the starter, and a correct one
that also prints megabytes; with ``--mix class``, every right and wrong variant of the level-2
corpus as well), each made unique with a comment, so no file is a byte-for-byte duplicate of another.
What the grader does share is what any class shares: it checks the kit's solution once before its
judges fork, and a student whose saves write the same bytes gets those verdicts by lookup
(``grader.engine.explore.shared_verdicts``); the class mix holds many variants that write other bytes. The
baselines are measured in the same run, on the same machine, at the same parallelism:

* ``python -c pass`` started once per submission (the floor for any one-process-per-student grader);
* ``pytest`` of one trivial test started once per submission (what a naive grader pays before it
  runs a single real check), measured on a sample and scaled to the full count.

Budget (DESIGN.md section 8): 200 submissions under 60 s on 2 cores.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
SOURCES = {
    "solution": KIT / "solutions" / "level2" / "agent.py",
    "starter": KIT / "exercises" / "level2" / "agent.py",
    "hostile-good": KIT / "tests" / "corpus" / "hostile" / "prints_megabytes.py",
}
# --mix class: what a class hands in, more or less: every right and wrong variant of the level-2
# corpus (pathlib, tempfile, os.open, classes, ...; most write other bytes than the solution, so
# their checks are computed, not looked up), the solution, the untouched starter, a hostile one.
CLASS = sorted((KIT / "tests" / "corpus" / "level2").glob("*.py")) + list(SOURCES.values())


def make_submissions(folder: Path, count: int, mix: str = "three") -> None:
    sources = list(SOURCES.items()) if mix == "three" else [(p.stem, p) for p in CLASS]
    for i in range(count):
        kind, source = sources[i % len(sources)]
        (folder / f"student{i:03d}").mkdir()
        text = source.read_text() + f"\n# submission {i} ({kind})\n"
        (folder / f"student{i:03d}" / "agent.py").write_text(text)


def parallel(commands: list[list[str]], jobs: int, cwd: Path) -> float:
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda c: subprocess.run(c, cwd=cwd, capture_output=True), commands))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=None,
                        help="submissions at once (default: what `crashcourse grade` picks, default_jobs)")
    parser.add_argument("--examples", type=int, default=None,
                        help="generated conversations per property test (default: the level's own)")
    parser.add_argument("--pytest-sample", type=int, default=10)
    parser.add_argument("--mix", choices=["three", "class"], default="three",
                        help="three: solution, starter and a hostile-but-correct one in turn (default); class: "
                             "every variant of the level-2 corpus too")
    args = parser.parse_args()
    if args.jobs is None:
        from grader.grading.batch import default_jobs
        args.jobs = default_jobs()

    with tempfile.TemporaryDirectory(prefix="crashcourse-bench-") as tmp:
        tmp = Path(tmp)
        subs = tmp / "submissions"
        subs.mkdir()
        make_submissions(subs, args.count, args.mix)
        trivial = tmp / "trivial"
        trivial.mkdir()
        (trivial / "test_one.py").write_text("def test_one():\n    assert True\n")

        bare = parallel([[sys.executable, "-c", "pass"]] * args.count, args.jobs, tmp)
        sample = parallel([[sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(trivial)]]
                          * args.pytest_sample, args.jobs, tmp)
        pytest_scaled = sample * args.count / args.pytest_sample

        command = [sys.executable, "-m", "grader", "grade", str(subs), "--level", "2", "--jobs", str(args.jobs),
                   "--output", str(tmp / "report.json")]
        if args.examples is not None:
            command += ["--examples", str(args.examples)]
        before = set(Path(tempfile.gettempdir()).glob("crashcourse-grade-*"))
        started = time.perf_counter()
        proc = subprocess.run(command, cwd=KIT, capture_output=True, text=True)
        graded = time.perf_counter() - started
        if proc.returncode != 0:
            print(proc.stderr)
            raise SystemExit("grading failed")
        report = json.loads((tmp / "report.json").read_text())
        statuses: dict = {}
        for s in report["submissions"]:
            statuses[s["status"]] = statuses.get(s["status"], 0) + 1
        # Folders of this run only (other batches may be grading on the same machine).
        leftovers = [p for p in Path(tempfile.gettempdir()).glob("crashcourse-grade-*") if p not in before
                     and p.stat().st_mtime >= time.time() - graded - 1]
        shutil.rmtree(subs, ignore_errors=True)

    n = args.count
    print(f"{n} submissions ({args.mix} mix), --jobs {args.jobs}, examples per property test: "
          f"{args.examples or 'level default'}")
    print(f"  crashcourse grade (isolated, all tests):   {graded:7.1f} s  ({graded / n * 1000:.0f} ms per submission)")
    print(f"  baseline: {n} x python -c pass:             {bare:7.1f} s  -> grade is {graded / bare:.1f}x this")
    print(f"  baseline: {n} x pytest one trivial test:    {pytest_scaled:7.1f} s  (from {args.pytest_sample} runs)"
          f"  -> grade is {graded / pytest_scaled:.2f}x this")
    print(f"  results: {statuses}; temporary folders left: {len(leftovers)}; "
          f"isolation: {report.get('isolation', 'not reported')}")
    projected = graded * 200 / n
    print(f"  budget: 200 submissions under 60 s; {'measured' if n == 200 else 'projected from this run'}: "
          f"{projected:.0f} s -> {'met' if projected < 60 else 'NOT met'}")
    print(f"  load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (other work slows every row)")


if __name__ == "__main__":
    main()
