"""The differential fidelity table: the crash engine's verdict against real SIGKILLs, for every corpus
submission of levels 2, 3, 5 and 6 (and each level's solution), right and wrong.

    python benchmarks/fidelity.py [--kills N] [--jobs J] [--only TEXT ...] [--output benchmarks/fidelity.md]

For each submission the loop runs once under the recorder, then in child processes killed with
SIGKILL after each of N sampled operations (all of them with --kills 0); each folder a kill leaves
is compared with the engine's predicted crash state and read by the level's own checker. Then the
loop is started again, for real, in the folder a kill left with the most leftover bytes, and killed
at the first points of that second run. The table sets what the kills found beside what the engine
says under M1 and its second runs (see tests/fidelity_harness.py). Writes the table in Markdown
(and the raw rows as JSON beside it) and prints the time it took.

With ``--only`` (a part of ``level/name``, as often as needed: ``--only 2/w06 --only 2/w07``) only
those submissions run, and where the table at ``--output`` exists already their rows are replaced in
it and every other row is kept: the header keeps the full run's time, and a list under the table
says which rows were run again, when, and how loaded the machine was. A table that does not exist
yet is written with those rows alone.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)

import fidelity_harness as harness  # noqa: E402

LIMITS = """## Known limits (where kills cannot speak, or the model leaves something out)

- **M2 (a torn write) is not killed for real.** A kill lands between two recorded operations; the
  kernel's page-by-page copy of one large write cannot be interrupted on cue from Python, so the
  submissions whose only fault is a torn write show `pass` under the kills and `PARSE`/`WHOLE`
  under the engine's M2 (not in this table, which compares M1 and second runs only).
- **M3 to M5 (power loss)** need a machine whose power is cut (or a block-device emulator such as
  LazyFS); a SIGKILL keeps everything the OS has. Level 3's power-cut verdicts are not in this table.
- **ATOMIC-DIR** (a temp file in another folder, renamed over the checkpoint) is about a rename
  between two file systems, which is a copy that a crash can tear. The kills run on one file system,
  but the kit refuses a rename between the system temp folder and the loop's folder as the kernel
  does between two file systems (EXDEV), on both sides: a loop that then copies (`shutil.move`) is
  killed in the middle of its copy for real (w06: PARSE), and one that does not stops there (w07:
  the loop does not finish). A rename from any other folder is atomic here, so the kills cannot show
  ATOMIC-DIR itself; the table leaves it out of both sides.
- **Findings with no crash at all** (a tool run twice by the loop itself, a returned state that is
  not the saved one) are about the calls, not the disk: the table compares crash states only.
- **A second run happens in the same process** in this harness's engine: it imports each submission
  itself, not through the kit's loader, so the fresh process every face starts a second run in is
  not used here (the kills use a new process). Code that names its temp file after `os.getpid()`
  therefore meets its own leftover in the harness's engine and not for real, except when a pid is
  reused. The corpus uses uuid names.
- **Sampled second runs.** The kills of a second run are its first operations (where it meets the
  leftover) and its end; the engine checks every point of up to four second runs.
- **Concurrency.** A loop that calls tools from threads is graded through a turnstile that lets one
  call through at a time, in a fixed order; real threads may interleave differently.
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=None,
                        help="kills per submission (0: every operation; default 40, or the table's own for --only)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", action="append", default=[],
                        help="only submissions whose level/name contains this (repeatable); their rows "
                             "replace the same rows of an existing table, the others are kept")
    parser.add_argument("--output", default=os.path.join(ROOT, "benchmarks", "fidelity.md"))
    args = parser.parse_args(argv)
    raw = os.path.splitext(args.output)[0] + ".json"
    # A part run again: its rows take the place of the same rows in the table, the rest stay.
    before = _read(raw, args.output) if args.only and os.path.exists(raw) else None
    if args.kills is None:
        args.kills = before[0]["kills"] if before else 40
    started = time.perf_counter()
    todo = [(level, name, path) for level, name, path in harness.corpus()
            if not args.only or any(part in f"{level}/{name}" for part in args.only)]
    if not todo:
        print(f"no corpus submission matches {args.only}", file=sys.stderr)
        return 2
    most = args.kills or None
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(harness.measure, level, name, path, most) for level, name, path in todo]
        rows = []
        for future in futures:
            row = future.result()
            rows.append(row)
            print(f"level {row.level} {row.name}: {'agrees' if row.agrees else 'DIFFERS'} "
                  f"({row.kills} kills, {row.rerun_kills} second-run kills)", flush=True)
    seconds = time.perf_counter() - started
    run = {"kills": args.kills, "seconds": round(seconds), "when": _now()}
    updates: list = []
    if before is not None:
        run, updates, kept = before
        fresh = {(r.level, r.name): r for r in rows}
        order = [(level, name) for level, name, _ in harness.corpus()]
        merged = {(r.level, r.name): r for r in kept}
        merged.update(fresh)
        rows = sorted(merged.values(), key=lambda r: order.index((r.level, r.name))
                      if (r.level, r.name) in order else len(order))
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        updates.append({"when": _now(), "kills": args.kills, "seconds": round(seconds),
                        "load": f"{load} (1, 5, 15 min) on {os.cpu_count()} cores",
                        "rows": [f"{r.level} {r.name}" for r in fresh.values()]})
    elif args.only:
        run["only"] = args.only
    agree = sum(r.agrees or bool(r.note) for r in rows)
    kills = sum(r.kills + r.rerun_kills for r in rows)
    command = f"python benchmarks/fidelity.py --kills {run['kills']}" + "".join(
        f" --only {part}" for part in run.get("only", []))
    text = ["# Fidelity: the crash engine against real SIGKILLs", "",
            f"Generated by `{command}` in {run['seconds']} s"
            + (f" ({run['when']})" if run.get("when") else "")
            + (", some rows since run again (see *Rows run again* below)" if updates else "")
            + f". {len(rows)} submissions, {kills} real kills: the engine and the kills agree on {agree} of "
            f"{len(rows)} (a loop that does not finish counts as agreeing: both say so).", "",
            "*engine*: the invariants the engine says break under M1 (a killed process) and in second runs "
            "after a crash (RERUN); *same folder*: kills whose folder held exactly the predicted crash "
            "state's bytes (random temp names aside); *kills say*: what the level's checker (level 6: the "
            "submission's own loader) found in the "
            "folders the kills left, and RERUN when a real second run broke.", "",
            harness.table(rows), ""]
    if updates:
        text += ["## Rows run again", "",
                 "Rows measured after the full run (the corpus case or the engine changed), each with "
                 "`--only`, the others kept as they were:", ""]
        for u in updates:
            text.append(f"- {u['when']}, `--kills {u['kills']}`, {u['seconds']} s, load average {u['load']}: "
                        + ", ".join(f"level {r}" for r in u["rows"]))
        text.append("")
    differing = [r for r in rows if not r.agrees and not r.note]
    if differing:
        text += ["## Disagreements", ""]
        for r in differing:
            text.append(f"- level {r.level} {r.name}: engine {sorted(r.engine_m1) or 'pass'}, kills "
                        f"{sorted(r.kills_say) or 'pass'}; " + "; ".join(r.differences[:3]))
        text.append("")
    text.append(LIMITS)
    with open(args.output, "w", encoding="utf-8") as f:
        f.write("\n".join(text))
    with open(raw, "w", encoding="utf-8") as f:
        f.write(json.dumps({"run": run, "updates": updates, "rows": json.loads(harness.to_json(rows))}, indent=1))
    print(f"{len(rows)} submissions, {kills} kills, {agree} agree, in {seconds:.0f} s; wrote {args.output}")
    return 0 if agree == len(rows) else 1


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def _read(raw: str, table: str) -> tuple:
    """``(run, updates, rows)`` of the table written before (its JSON; one of the first tables, a bare
    list of rows, takes its run's settings from the Markdown's first line)."""
    with open(raw, encoding="utf-8") as f:
        data = json.load(f)
    if isinstance(data, list):
        data = {"rows": data, "updates": [], "run": {"kills": 40, "seconds": 0, "when": ""}}
        with open(table, encoding="utf-8") as f:
            said = re.search(r"--kills (\d+)` in (\d+) s", f.read())
        if said:
            data["run"].update(kills=int(said.group(1)), seconds=int(said.group(2)))
    return data["run"], data["updates"], [harness.from_json(row) for row in data["rows"]]


if __name__ == "__main__":
    sys.exit(main())
