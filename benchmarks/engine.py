"""How fast the crash engine is: crash states per second, and its cost against an uncrashed run.

Run from the repository root::

    python benchmarks/engine.py            # the numbers, best of 5
    python benchmarks/engine.py --repeat 1 --models M1 M2 M3 M4 M5

It grades one submission (the level-2 solution) the way the level-2 tests do: the course's task
(support_tickets) and one generated conversation of 12 turns with large tool results, every crash
state under M1 and M2. Everything is measured in this process, so the ratio to the uncrashed run is
the number to read: it does not depend on how fast the machine is. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import seed as hypothesis_seed  # noqa: E402

from grader.engine.conversations import conversations, _without_local_constants  # noqa: E402
from grader.engine import explore as explore_module  # noqa: E402
from grader.engine.explore import Exploration, check_trace, explore_loop, record_run  # noqa: E402
from grader.engine.scripted import support_tickets  # noqa: E402

BUDGET_SECONDS = 2.0  # DESIGN.md §8: one submission, all crash states of all scenarios


def load_solution():
    path = os.path.join(ROOT, "solutions", "level2", "agent.py")
    spec = importlib.util.spec_from_file_location("level2_solution", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.run_agent


def twelve_turns(seed: int):
    """The first generated conversation of exactly 12 turns whose tool results add up to over 60 KB,
    under a fixed Hypothesis seed (so every run of the benchmark explores the same one)."""
    found = []

    @settings(database=None, max_examples=200, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @hypothesis_seed(seed)
    @given(conversations(min_turns=12, max_turns=12))
    def draw(scenario):
        if not found and sum(len(r) for r in scenario.results) > 60_000:
            found.append(scenario)

    warnings.filterwarnings("ignore", message="Generating overly large repr")
    with _without_local_constants():  # the same draw whatever else is imported (see grader.engine.conversations)
        draw()
    if not found:
        raise SystemExit(f"no 12-turn conversation with 60 KB of results under seed {seed}; try another --seed")
    return found[0]


@contextlib.contextmanager
def in_temp_dir():
    old = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="crashcourse-bench-") as d:
        os.chdir(d)
        try:
            yield d
        finally:
            os.chdir(old)


def fresh() -> None:
    """Forget shared verdicts (grader.engine.explore.shared_verdicts), so each timed run checks every state."""
    explore_module._VERDICTS.clear()


def best(fn, repeat: int, before=fresh) -> float:
    times = []
    for _ in range(repeat):
        before()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def uncrashed(run, scenario) -> None:
    """The loop as a learner runs it: no recorder, no crash states."""
    with in_temp_dir():
        run(scenario.task, scenario.tools, scenario.model(), scenario.executor(), "checkpoints")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="take the best of this many runs (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the scenarios (default 0)")
    parser.add_argument("--models", nargs="+", default=["M1", "M2"], help="crash models (default: M1 M2, level 2)")
    args = parser.parse_args(argv)

    run = load_solution()
    scenarios = [support_tickets(args.seed), twelve_turns(args.seed)]
    models = tuple(args.models)

    print(f"crash engine benchmark: the level-2 solution, models {' '.join(models)}, best of {args.repeat}")
    print(f"{'scenario':<36} {'ops':>5} {'points':>6} {'states':>7} {'plain s':>8} {'record s':>8} "
          f"{'explore s':>9} {'ratio':>6} {'states/s':>9}")
    totals = {"plain": 0.0, "record": 0.0, "explore": 0.0, "check": 0.0, "states": 0}
    for scenario in scenarios:
        plain = best(lambda: uncrashed(run, scenario), args.repeat)

        def recorded():
            with in_temp_dir() as d:
                record_run(run, scenario, d, "checkpoints", timeout=None)
        record = best(recorded, args.repeat)

        result = explore_loop(run, scenario, models=models, timeout=None)
        if not result.ok:
            print(result.report())
            return 2
        explore = best(lambda: explore_loop(run, scenario, models=models, timeout=None), args.repeat)

        # Checking alone: the trace recorded once, the crash states rebuilt and checked each time.
        with in_temp_dir() as d:
            recorder, _, _, _ = record_run(run, scenario, d, "checkpoints", timeout=None)
            folder = os.path.join(d, "checkpoints")
            check = best(lambda: check_trace(Exploration(scenario.name, models), recorder, folder, scenario),
                         args.repeat)

        # A second submission of the same conversation, whose saves write the same bytes: its
        # verdicts are looked up (what crashcourse grade's judges get after the warm-up).
        explore_module._VERDICTS.clear()
        explore_loop(run, scenario, models=models, timeout=None)
        totals["shared"] = totals.get("shared", 0.0) + best(
            lambda: explore_loop(run, scenario, models=models, timeout=None), args.repeat, before=lambda: None)

        totals["plain"] += plain
        totals["record"] += record
        totals["explore"] += explore
        totals["check"] += check
        totals["states"] += result.states
        print(f"{scenario.name[:36]:<36} {len(result.ops):>5} {result.points:>6} {result.states:>7} {plain:>8.4f} "
              f"{record:>8.4f} {explore:>9.4f} {explore / plain:>6.1f} {result.states / check:>9.0f}")

    ratio = totals["explore"] / totals["plain"]
    print()
    print(f"crash states explored: {totals['states']}")
    print(f"crash states per second (rebuild + check, trace already recorded): {totals['states'] / totals['check']:.0f}")
    print(f"crash states per second (end to end, recorded run included): {totals['states'] / totals['explore']:.0f}")
    print(f"uncrashed run: {totals['plain']:.4f} s; under the recorder: {totals['record']:.4f} s "
          f"({totals['record'] / totals['plain']:.1f}x)")
    print(f"every crash state explored: {totals['explore']:.4f} s = {ratio:.1f}x the uncrashed run")
    print(f"the same, verdicts shared with an earlier run of the same conversations: {totals['shared']:.4f} s "
          f"= {totals['shared'] / totals['plain']:.1f}x the uncrashed run")
    verdict = "yes" if totals["explore"] < BUDGET_SECONDS else "NO"
    print(f"under the {BUDGET_SECONDS:g} s budget for one submission: {verdict} "
          f"({totals['explore'] / BUDGET_SECONDS:.0%} of it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
