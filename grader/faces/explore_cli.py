"""``crashcourse explore``: crash-test any program, in any language, from its kernel trace.

    crashcourse explore --watch state --check 'node check.js {dir}' -- node save.js state

runs the program once under ``strace -f`` in a box where ``state`` is a private copy (the real
folder is never written), rebuilds every folder a crash could leave under the chosen models
(:mod:`grader.engine.folder_crash`), lays each distinct one out in a fresh folder and runs the
checker on it, in a box, with a time limit. A non-zero exit means that state is broken.

The report names each crash point by the system call before it (path, offset, size, the process,
and the stack frame where ``--stacks`` can read one), folds neighbouring points with the same
verdicts into one stretch, shows the checker's words for the first broken state of each stretch,
and sums up the kinds of mistake found. Exit status: 0 clean, 1 broken states found, 2 the command
could not run (usage, no strace, the program timed out, or the checker rejects the finished run).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import random
import shutil
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from grader.engine import crash_models, folder_crash
from grader.engine.crash_models import MODEL_NAMES, MODELS
from grader.engine.ops import Op

DEFAULT_MODELS = ("M1", "M2", "M3", "M5")
MAX_POINTS = 2000


def register(sub: Any) -> None:
    p = sub.add_parser(
        "explore", help="crash-test any program (any language) from its kernel trace",
        description="Run PROGRAM once with DIR privately copied (the real folder is never written),\n"
                    "rebuild every state a crash could leave DIR in, and run the checker on each.\n"
                    "Exit status: 0 clean, 1 broken states found, 2 could not run.",
        epilog="example:\n  crashcourse explore --watch state --check 'node check.js {dir}' -- node save.js state",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--watch", required=True, metavar="DIR", help="the folder whose crash states are checked")
    p.add_argument("--check", required=True, metavar="'CMD {dir}'",
                   help="shell command run on each crash state ({dir}: its folder); a non-zero exit means broken")
    p.add_argument("--models", default=",".join(DEFAULT_MODELS),
                   help=f"crash models, comma-separated, from {','.join(MODELS)} (default: %(default)s)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="checker runs at once (default: cores)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--no-box", action="store_true", help="run without bubblewrap (said in the report)")
    p.add_argument("--seed", type=int, default=0, help="seed for sampling crash points in a long run (default 0)")
    p.add_argument("--max-points", type=int, default=MAX_POINTS,
                   help="crash points explored at most; a longer run is sampled with --seed (default %(default)s)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds one checker run may take (default 30)")
    p.add_argument("--run-timeout", type=float, default=600.0, help="seconds the program may take (default 600)")
    p.add_argument("--stacks", action="store_true",
                   help="read each call's stack (strace -k): the function that made it, where symbols allow")
    p.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS... ({dir} in ARGS: the folder)")
    p.set_defaults(handler=cmd_explore)


class UsageError(Exception):
    pass


@dataclass
class Point:
    """One crash point: the operation before it, and each model's states (digest, losses)."""

    index: int
    op: str = ""
    next_call: Optional[dict] = None  # the call after this point: where a real kill lands to reproduce it
    states: dict = field(default_factory=dict)  # model -> [(key, losses)]


def cmd_explore(args: argparse.Namespace) -> int:
    try:
        report = explore(args)
    except UsageError as exc:
        if args.json:
            print(json.dumps({"error": str(exc), "exit": 2}, indent=2))
        else:
            print(f"crashcourse explore: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render(report))
    return report["exit"]


def explore(args: argparse.Namespace) -> dict:
    # The program is the user's own and its files may be large: no cap on what its replay holds (a
    # submission graded by the kit keeps crash_models.HELD_LIMIT). Put back after, so a caller in the
    # same process (a test, then a grade) keeps the judge's cap.
    held, crash_models.HELD_LIMIT = crash_models.HELD_LIMIT, None
    try:
        return _explore_program(args)
    finally:
        crash_models.HELD_LIMIT = held


def _explore_program(args: argparse.Namespace) -> dict:
    program = list(args.program)
    if program and program[0] == "--":
        program = program[1:]
    if not program:
        raise UsageError("name the program to run after --, e.g. -- node save.js state")
    if shutil.which(program[0]) is None:
        raise UsageError(f"{program[0]}: no such program (not on PATH, or not executable)")
    models = tuple(m.strip().upper() for m in args.models.split(",") if m.strip())
    if not models or set(models) - set(MODELS):
        raise UsageError(f"--models takes a comma-separated list from {', '.join(MODELS)}, not {args.models!r}")
    models = tuple(m for m in MODELS if m in models)
    if not os.path.isdir(args.watch):
        raise UsageError(f"--watch {args.watch}: no such folder")
    if args.jobs < 1 or args.max_points < 2:
        raise UsageError("--jobs must be at least 1 and --max-points at least 2")
    try:  # strace, boxes and rlimits are Linux's: imported here, so the other commands start anywhere
        from grader.grading import kernel_trace, program_trace
    except ImportError as exc:
        raise UsageError(f"explore runs on Linux only (this Python lacks {exc.name or 'a POSIX module'})") from None
    problem = kernel_trace.problem()
    if problem:
        raise UsageError(f"the kernel trace cannot be taken here: {problem}")
    box = not args.no_box
    if box and program_trace.box_problem():
        raise UsageError(program_trace.box_problem())
    watch = os.path.realpath(args.watch)
    run = program_trace.ProgramRun(watch, program, os.getcwd(), box=box, stacks=args.stacks,
                                   timeout=args.run_timeout)
    try:
        return _explore(args, run, models, program_trace)
    finally:
        run.cleanup()


def _explore(args: argparse.Namespace, run: Any, models: tuple, program_trace: Any) -> dict:
    run.run()
    if run.timed_out:
        raise UsageError(f"the program ran longer than {args.run_timeout:g} s and was stopped (--run-timeout)")
    if run.returncode == 126 and not run.output and not run.box:
        raise UsageError("the folder's copy could not be mounted over it (no mount namespace here), so the "
                         "program was not run")
    if run.returncode == 127 and b"No such file" in run.output:
        raise UsageError(f"the program could not be started: {run.output.decode('utf-8', 'replace').strip()[:300]}")
    folder = run.folder

    unseen: list = []

    def ops(notes=None):
        return program_trace.operations(run.trace_path, run.cwd, folder, notes)

    total = sum(1 for _ in ops(unseen))
    run.notes.extend(dict.fromkeys(unseen))
    points = None
    if total + 1 > args.max_points:
        rng = random.Random(args.seed)
        points = {0, total, *rng.sample(range(1, total), args.max_points - 2)}
    start = time.monotonic()
    table: dict[int, Point] = {}
    verdicts: dict[str, Any] = {}   # state digest -> program_trace.Verdict (or a Future while running)
    counts = {"states": 0, "distinct": 0}
    layout_root = os.path.join(run.scratch, "states")
    os.mkdir(layout_root)
    refused: list = []
    wanted = (lambda k: True) if points is None else points.__contains__

    pids: set = set()

    def keep_op(i: int, op: Op) -> None:
        pids.add(op.note)
        if wanted(i + 1) or wanted(i):
            table.setdefault(i + 1, Point(i + 1)).op = describe(op, folder)
            table.setdefault(i, Point(i)).next_call = {
                "call": op.api, "path": op.path, "nth": op.index, "pid": op.note[4:],
                "relative": os.path.relpath(op.path, op.cwd) if op.path and getattr(op, "cwd", None) else None}

    def check(state: folder_crash.FolderState) -> Any:
        where = tempfile.mkdtemp(prefix="state-", dir=layout_root)
        tmp = where + "-tmp"  # the checker's own TMPDIR: checkers running at once never share one
        os.mkdir(tmp)
        try:
            refused.extend(program_trace.lay_out(state.files, state.dirs, where))
            return program_trace.run_checker(args.check, where, box=run.box, timeout=args.timeout, tmp=tmp,
                                             cwd=run.cwd)
        finally:
            shutil.rmtree(where, ignore_errors=True)
            shutil.rmtree(tmp, ignore_errors=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        running: set = set()
        for state in folder_crash.folder_states(ops(), run.initial.files, folder, models, run.initial.dirs,
                                                points=points, on_op=keep_op):
            counts["states"] += 1
            key = state.key()
            point = table.setdefault(state.point, Point(state.point))
            point.states.setdefault(state.model, []).append((key, state.losses, state.torn))
            if key not in verdicts:
                counts["distinct"] += 1
                verdicts[key] = pool.submit(check, state)
                running.add(verdicts[key])
                if len(running) >= 4 * args.jobs:  # bounded: states are made as fast as they are checked
                    _, running = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
        for key, future in list(verdicts.items()):
            verdicts[key] = future.result()
    seconds = time.monotonic() - start
    if len(pids) == 1:  # one process: its id says nothing
        only = pids.pop()
        for point in table.values():
            point.op = point.op.replace(f" [{only}]", "").replace(f"[{only}, ", "[")
    return _report(args, run, models, table, verdicts, total, points, counts, seconds, refused)


def describe(op: Op, folder: str) -> str:
    """One system call in the program's terms: ``write(state/save.json, offset 0, 96 bytes)``."""
    base = os.path.basename(folder)

    def name(path: Optional[str]) -> str:
        if path is None:
            return "?"
        if path == folder:
            return base + "/"
        return base + "/" + path[len(folder) + 1:] if path.startswith(folder + os.sep) else path

    api = op.api or op.kind
    if op.kind == "open":
        flags = [f for key, f in (("create", "O_CREAT"), ("trunc", "O_TRUNC"), ("append", "O_APPEND"),
                                  ("excl", "O_EXCL"), ("sync", "O_SYNC"), ("tmpfile", "O_TMPFILE")) if key in op.flags]
        text = f"{api}({name(op.path)}{', ' + '|'.join(flags) if flags else ''})"
    elif op.kind == "write":
        text = f"{api}({name(op.path)}, offset {op.offset:,}, {len(op.data):,} bytes)"
    elif op.kind == "truncate":
        text = f"{api}({name(op.path)}, {op.size:,})"
    elif op.kind in ("rename", "link"):
        text = f"{api}({name(op.path)} -> {name(op.dest)})"
    elif op.kind == "sync":
        text = f"{api}()"
    else:
        text = f"{api}({name(op.path)}{'/' if op.is_dir and op.path != folder else ''})"
    where = op.note + (f", {op.payload}" if op.payload else "")
    return f"{text} [{where}]" if where else text


def _report(args, run, models, table, verdicts, total, points, counts, seconds, refused) -> dict:
    rows, broken_states = _rows(table, models, verdicts)
    stretches = _stretches(rows)
    by_point: dict = {}
    for k, model, key, losses, torn in broken_states:
        by_point.setdefault(k, []).append((model, key, losses, torn))
    for s in stretches:
        s["broken"] = any(c.startswith("broken") for c in s["cells"].values())
        if s["broken"]:
            k = next(p for p in range(s["first"], s["last"] + 1) if p in by_point)
            model, key, losses, torn = by_point[k][0]
            s["first_broken"] = _first_broken(k, model, losses, torn, table[k].next_call, verdicts[key])
    checker_seconds = [v.seconds for v in verdicts.values()]
    rejects_finished = _rejects(table.get(total), verdicts)
    return {
        "program": list(run.argv), "watch": run.watch, "check": args.check, "models": list(models),
        "model_names": {m: MODEL_NAMES[m] for m in models},
        "box": "bubblewrap" if run.box else "none (--no-box)", "stacks": args.stacks,
        "program_exit": run.returncode, "program_seconds": round(run.seconds, 3),
        "operations": total, "crash_points": total + 1,
        "explored_points": (total + 1) if points is None else len(points),
        "sampled": None if points is None else {"seed": args.seed, "points": len(points)},
        "states": counts["states"], "distinct_states": counts["distinct"],
        "broken_states": len(broken_states),
        "seconds": round(seconds, 3), "jobs": args.jobs,
        "states_per_second": round(counts["distinct"] / seconds, 1) if seconds else None,
        "checker_seconds_mean": round(sum(checker_seconds) / len(checker_seconds), 4) if checker_seconds else None,
        "calls": {k: p.next_call for k, p in sorted(table.items()) if p.next_call},
        "stretches": stretches, "mistakes": _mistakes(broken_states, table),
        "notes": _notes(run, rejects_finished, _rejects(table.get(0), verdicts), refused),
        "output": run.output.decode("utf-8", "replace")[-2000:],
        "exit": 2 if rejects_finished else 1 if broken_states else 0,
    }


def _rows(table: dict, models, verdicts: dict) -> tuple:
    """One row per crash point with states: ``(point, its call, {model: cell})``; and every broken
    state as ``(point, model, key, losses, torn)``."""
    rows, broken_states = [], []
    for k in sorted(table):
        point = table[k]
        if not point.states:
            continue
        cells = {}
        for model in models:
            states = point.states.get(model, [])
            bad = [(key, losses, torn) for key, losses, torn in states if verdicts[key].broken]
            cells[model] = "-" if not states else ("ok" if not bad else f"broken {len(bad)}/{len(states)}")
            broken_states.extend((k, model, key, losses, torn) for key, losses, torn in bad)
        rows.append((k, point.op, cells))
    return rows, broken_states


def _stretches(rows: list) -> list:
    """Neighbouring points whose verdicts agree (ok or broken per model), folded into stretches."""
    stretches: list = []
    shapes: list = []
    for k, op, cells in rows:
        shape = tuple(c.startswith("broken") for c in cells.values())  # "-" (no state there) folds with ok
        if shapes and shapes[-1] == shape:
            stretches[-1]["last"], stretches[-1]["last_op"] = k, op
            for m, c in cells.items():
                stretches[-1]["cells"][m] = _add(stretches[-1]["cells"][m], c)
        else:
            stretches.append({"first": k, "last": k, "first_op": op, "last_op": op, "cells": dict(cells)})
            shapes.append(shape)
    return stretches


def _first_broken(k: int, model: str, losses: list, torn, kill_before, v) -> dict:
    """The first broken state of a stretch: what was lost, the call a kill would come before, and what
    the checker said (``v``, its verdict)."""
    return {"point": k, "model": model, "what": [loss.words for loss in losses if loss.words],
            "losses": [{"kind": loss.kind, "name": loss.name, "op": loss.op, "size": loss.size,
                        "mistake": loss.mistake} for loss in losses],
            "kill_before": kill_before,
            "mistake": folder_crash.mistake(losses),
            "torn": list(torn) if torn else None, "exit": v.returncode,
            "timed_out": v.timed_out, "output": v.output}


def _mistakes(broken_states: list, table: dict) -> list:
    """Each kind of mistake the broken states show, with the lesson's words, first seen first."""
    mistakes: dict = {}
    for k, model, _key, losses, _torn in broken_states:
        kind = folder_crash.mistake(losses)
        entry = mistakes.setdefault(kind, {"kind": kind, "name": folder_crash.KINDS[kind][0],
                                           "advice": folder_crash.KINDS[kind][1], "states": 0, "models": [],
                                           "first_point": k, "first_op": table[k].op,
                                           "file": losses[0].name if losses else ""})
        entry["states"] += 1
        if model not in entry["models"]:
            entry["models"].append(model)
    return sorted(mistakes.values(), key=lambda m: m["first_point"])


def _rejects(point: Optional[Point], verdicts: dict) -> bool:
    """Whether the checker rejects the folder at ``point`` with nothing lost (its M1 state)."""
    return point is not None and "M1" in point.states and any(verdicts[key].broken for key, _, _ in point.states["M1"])


def _notes(run, rejects_finished: bool, rejects_start: bool, refused: list) -> list:
    """What the reader should know before the verdicts: how the program and the checker behaved."""
    notes = list(run.notes)
    if rejects_finished:
        notes.append("the checker rejects the folder the finished program left (no crash at all): either the "
                     "program failed or the checker is wrong, so the verdicts below say little")
    if rejects_start:
        notes.append("the checker rejects the folder as it was before the program ran")
    if run.returncode:
        said = [line for line in run.output.decode("utf-8", "replace").splitlines() if line.strip()]
        notes.append(f"the program exited with status {run.returncode}" + (f"; it said: {said[-1][:200]}" if said else ""))
    if run.initial.skipped:
        notes.append("not rebuilt (links or special files): " + ", ".join(run.initial.skipped[:5]))
    if refused:
        notes.append(f"{len(refused)} name(s) from the trace were refused when laying states out, e.g. "
                     f"{refused[0][0]!r} ({refused[0][1]})")
    return notes


def _add(a: str, b: str) -> str:
    """Two cells of one stretch added up: ``broken 1/2`` and ``broken 2/3`` give ``broken 3/5``."""
    if a == "-" or b == "-":
        return b if a == "-" else a
    if not a.startswith("broken") or not b.startswith("broken"):
        return a
    x, y = a.split(" ")[1].split("/"), b.split(" ")[1].split("/")
    return f"broken {int(x[0]) + int(y[0])}/{int(x[1]) + int(y[1])}"


def render(r: dict, width: int = 100) -> str:
    lines = []
    cmd = " ".join(r["program"])
    lines.append(f"crashcourse explore: {cmd}")
    lines.append(f"  watching {r['watch']}, checked by: {r['check']}")
    lines.append(f"  box: {r['box']}; models: " + ", ".join(f"{m} ({n})" for m, n in r["model_names"].items()))
    sampled = (f", {r['explored_points']:,} of them sampled with seed {r['sampled']['seed']}"
               if r["sampled"] else "")
    lines.append(f"  the program ran once ({r['program_seconds']:.2f} s, exit {r['program_exit']}): "
                 f"{r['operations']:,} file operations under the folder, {r['crash_points']:,} crash points{sampled}; "
                 f"{r['states']:,} crash states, {r['distinct_states']:,} distinct, checked in {r['seconds']:.1f} s "
                 f"({r['jobs']} at a time, {r['states_per_second'] or 0:g} states/s)")
    for note in r["notes"]:
        lines.extend(textwrap.wrap("note: " + note, width, initial_indent="  ", subsequent_indent="    "))
    lines.append("")
    models = r["models"]
    cw = max(12, *(len(c) for s in r["stretches"] for c in s["cells"].values())) if r["stretches"] else 12
    lw = max(30, width - 2 - (cw + 2) * len(models))
    lines.append("  " + "crash point (after the call)".ljust(lw) + "".join("  " + m.ljust(cw) for m in models))
    lines.append("  " + "─" * lw + "".join("  " + "─" * cw for _ in models))
    for s in r["stretches"]:
        label = _label(s)
        wrapped = textwrap.wrap(label, lw, subsequent_indent="    ") or [""]
        for i, part in enumerate(wrapped):
            cells = "".join("  " + s["cells"][m].ljust(cw) for m in models) if i == 0 else ""
            lines.append(("  " + part.ljust(lw) + cells).rstrip())
    if "M2" in models:
        lines.append("  (an M2 cell is the next call torn part way: it is in flight at that point)")
    broken = [s for s in r["stretches"] if s["broken"]]
    if broken:
        lines.append("")
        lines.append("Broken stretches, the first broken state of each:")
        for n, s in enumerate(broken, 1):
            fb = s["first_broken"]
            lines.append("")
            lines.extend(textwrap.wrap(f"{n}. {_label(s)}", width, initial_indent="  ", subsequent_indent="     "))
            lines.append(f"     under {fb['model']} ({MODEL_NAMES[fb['model']]}), at point {fb['point']}:")
            for what in fb["what"]:
                lines.append(f"       {what}")
            said = "timed out" if fb["timed_out"] else f"exit {fb['exit']}"
            lines.append(f"     the checker said ({said}):")
            out = [line for line in fb["output"].strip().splitlines() if line.strip()] or ["(nothing)"]
            lines.extend(f"       | {line[:width - 10]}" for line in out[:8])
            if len(out) > 8:
                lines.append(f"       | ... ({len(out) - 8} more lines)")
    lines.append("")
    if r["mistakes"]:
        lines.append("Mistakes found:")
        for m in r["mistakes"]:
            lines.append("")
            lines.append(f"  {m['name']}: {m['states']} broken state(s) under {', '.join(m['models'])}, "
                         f"first after {m['first_op'] or 'the start'}")
            lines.extend(textwrap.wrap(m["advice"], width, initial_indent="    ", subsequent_indent="    "))
        lines.append("")
        lines.append(f"{r['broken_states']} broken crash state(s): exit status {r['exit']}.")
    else:
        lines.append(f"No crash state the checker rejects under {', '.join(models)}: exit status {r['exit']}.")
    return "\n".join(lines)


def _label(s: dict) -> str:
    first = f"{s['first']}: {s['first_op']}" if s["first"] else "0: before the first call"
    if s["first"] == s["last"]:
        return first
    return f"{first} … {s['last']}: {s['last_op']}"
