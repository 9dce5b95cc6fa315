"""Level 6's point in numbers: whole-history saves against a journal, at 50, 200 and 1000 turns.

Run from the repository root::

    python benchmarks/journal.py                    # 50, 200 and 1000 turns
    python benchmarks/journal.py --turns 50 200     # quicker

Both loops run the same scripted task (one small tool result per turn, the same as level 6's
grader uses) in a fresh temporary folder:

* **level 2's solution**: every save writes the whole state to a temp file and renames it;
* **level 6's solution**: a snapshot plus an append-only journal, compacted when the journal has
  outgrown the snapshot.

For each run the table shows the bytes written (exact: the kernel's count of bytes this process
passed to write(2), read from /proc/self/io, falling back to the grader's recorder elsewhere), the
size of the final conversation, how many times over it was written, and the run's wall time (with
a bare scripted model, so the time is the loop's and its saves'). The
ratios are measured in the same run on the same machine, so they are the numbers to read.
Linear growth shows as a "times over" column that stays flat as the turns grow; quadratic
growth as one that grows with the turns.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from grader.engine.explore import record_run  # noqa: E402
from grader.levels.journal import long_conversation  # noqa: E402

LOOPS = {"level 2 (whole state)": "solutions/level2/agent.py", "level 6 (journal)": "solutions/level6/agent.py"}


def load(relative: str):
    path = os.path.join(ROOT, relative)
    spec = importlib.util.spec_from_file_location(f"bench_{len(sys.modules)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def written_by_kernel() -> int | None:
    """Bytes this process has passed to write(2) so far, or None where /proc/self/io is not there."""
    try:
        with open("/proc/self/io", encoding="ascii") as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


@contextlib.contextmanager
def scratch():
    old = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="crashcourse-bench-") as folder:
        os.chdir(folder)
        try:
            yield folder
        finally:
            os.chdir(old)


def quick_model_and_tools(scenario):
    """The scenario's script without the grader's checks, so the time measured is the loop's own.

    (The scripted model checks every message it is sent, as the API would: that is worth its cost
    in the grader, but at 1000 turns it would dominate the time of both loops alike.)
    """
    responses = iter(scenario.responses)
    results = iter(scenario.results)

    def call_model(**_):
        return next(responses)

    def execute_tool(name, tool_input):
        return next(results)

    return call_model, execute_tool


def run_plain(module, scenario) -> tuple[float, int | None]:
    """One uncrashed run, no recorder: (seconds, bytes written by the kernel's count)."""
    model, tools = quick_model_and_tools(scenario)
    with scratch():
        before = written_by_kernel()
        start = time.perf_counter()
        module.run_agent(scenario.task, scenario.tools, model, tools, "checkpoints")
        seconds = time.perf_counter() - start
        after = written_by_kernel()
    return seconds, None if before is None else after - before


def run_recorded(module, scenario) -> int:
    """The grader's count: the sum of every write the recorder saw."""
    with tempfile.TemporaryDirectory(prefix="crashcourse-bench-") as folder:
        recorder, _, error, _ = record_run(module.run_agent, scenario, folder, "checkpoints", timeout=None)
    if error:
        raise SystemExit(error)
    return sum(len(op.data) for op in recorder.ops if op.kind == "write")


def final_size(scenario) -> int:
    """Size of the finished conversation's JSON (the history the run had to keep)."""
    from grader.engine.checkpoint import reference_saves

    saves = reference_saves(scenario.task, scenario.responses, scenario.results)
    return len(json.dumps(saves[-1][1], ensure_ascii=False).encode("utf-8"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[50, 200, 1000])
    args = parser.parse_args(argv)

    modules = {name: load(path) for name, path in LOOPS.items()}
    # The kernel's count and the grader's count agree (checked once, on the smallest run).
    small = long_conversation(min(args.turns), seed=1)
    for name, module in modules.items():
        _, kernel = run_plain(module, small)
        recorded = run_recorded(module, small)
        if kernel is not None:
            print(f"{name}: {recorded:,} bytes by the recorder, {kernel:,} by /proc/self/io over {min(args.turns)} turns")

    rows = []
    for turns in args.turns:
        scenario = long_conversation(turns, seed=1)
        size = final_size(scenario)
        row = {"turns": turns, "history": size}
        for name, module in modules.items():
            seconds, kernel = run_plain(module, scenario)
            written = kernel if kernel is not None else run_recorded(module, scenario)
            row[name] = (written, seconds)
        rows.append(row)

    old, new = LOOPS
    print()
    print(f"{'turns':>6} {'history':>10} | {'level 2 writes':>15} {'times over':>10} {'time':>8} | "
          f"{'level 6 writes':>15} {'times over':>10} {'time':>8} | {'bytes ratio':>11} {'time ratio':>10}")
    for row in rows:
        (b2, t2), (b6, t6) = row[old], row[new]
        print(f"{row['turns']:>6} {_size(row['history']):>10} | {_size(b2):>15} {b2 / row['history']:>10.1f} "
              f"{t2:>7.2f}s | {_size(b6):>15} {b6 / row['history']:>10.1f} {t6:>7.2f}s | "
              f"{b2 / b6:>10.1f}x {t2 / max(t6, 1e-9):>9.1f}x")
    if len(rows) >= 2:
        first, last = rows[0], rows[-1]
        grow = last["turns"] / first["turns"]
        print()
        for name in LOOPS:
            ratio = last[name][0] / first[name][0]
            print(f"{name}: {grow:g}x the turns wrote {ratio:,.1f}x the bytes "
                  f"(linear would be about {grow:g}x, quadratic about {grow * grow:g}x)")
    return 0


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return str(n)


if __name__ == "__main__":
    sys.exit(main())
