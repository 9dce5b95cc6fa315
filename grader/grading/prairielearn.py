"""Grading one submission inside an external-grader container, in PrairieLearn's layout.

PrairieLearn starts the question's image for each submission with the student's files in
``/grade/student`` and reads ``/grade/results/results.json`` when the entrypoint exits: a
``score`` from 0 to 1, and ``tests`` with ``points`` and ``max_points`` for its results table
(https://prairielearn.readthedocs.io/en/latest/externalGrading/). The repository's ``Dockerfile``
builds such an image with ``crashcourse prairielearn-run`` as its command.

The grading itself is ``crashcourse grade`` on a folder holding that one submission, so the
verdicts are the ones a class batch or a student's own ``pytest exercises/levelN`` gives.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Optional

from grader.grading.batch import grade_batch

RUN_HELP = """\
Grade the one submission in GRADE_ROOT/student and write GRADE_ROOT/results/results.json in
PrairieLearn's external-grader format (score from 0 to 1, one row per test).

GRADE_ROOT is /grade inside the container; set CRASHCOURSE_GRADE_ROOT or --grade-root to try it
anywhere else. The level comes from --level or CRASHCOURSE_LEVEL (the Dockerfile sets it).
"""


def prairielearn_result(entry: dict) -> dict:
    """One submission's report entry (the ``grade --format json`` shape) in PrairieLearn's shape."""
    scored = [t for t in entry.get("tests", []) if t.get("status") != "manual review"]
    if entry.get("status") == "error" and not scored:
        # Nothing could be run (no file, or a file that does not import): PrairieLearn then takes
        # no attempt from the student and shows the reason.
        reason = entry.get("error") or "the submission could not be graded"
        return {"gradable": False, "score": 0.0, "format_errors": [reason], "message": reason}
    max_score = float(entry.get("max_score") or 0.0)
    score = float(entry.get("score") or 0.0)
    tests = []
    for t in entry.get("tests", []):
        row = {"name": t["name"], "points": float(t.get("score") or 0.0),
               "max_points": float(t.get("max_score") or 0.0), "output": t.get("output") or ""}
        if t.get("reason"):
            row["message"] = t["reason"]
        elif t.get("status") == "manual review":
            row["message"] = "read by your instructor; no automatic points"
        tests.append(row)
    message = f"{score:g} of {max_score:g} points"
    if entry.get("error"):
        message += f". {entry['error']}"
    return {"gradable": True, "score": (score / max_score) if max_score else 0.0, "message": message, "tests": tests}


def run_on_prairielearn(level: int, grade_root: str, *, timeout: float = 120.0, seed: Optional[int] = None,
                        scenarios: Optional[str] = None) -> dict:
    """Grade ``grade_root/student``; write and return ``grade_root/results/results.json``'s content."""
    student = os.path.join(grade_root, "student")
    results = os.path.join(grade_root, "results", "results.json")
    if not os.path.isdir(student):
        result = {"gradable": False, "score": 0.0, "format_errors": [f"no submission folder at {student}"]}
    else:
        with tempfile.TemporaryDirectory(prefix="crashcourse-prairielearn-") as folder:
            shutil.copytree(student, os.path.join(folder, "student"), symlinks=True)
            batch = grade_batch(folder, level, jobs=1, timeout=timeout, seed=seed, scenarios=scenarios)
        result = prairielearn_result(batch["submissions"][0])
    os.makedirs(os.path.dirname(results), exist_ok=True)
    tmp = results + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2, ensure_ascii=False)
    os.replace(tmp, results)
    return result


def _run(args: argparse.Namespace) -> int:
    level = args.level if args.level is not None else os.environ.get("CRASHCOURSE_LEVEL")
    if level is None or not str(level).isdigit():
        print("crashcourse prairielearn-run: say which level to grade, with --level N or CRASHCOURSE_LEVEL=N",
              file=sys.stderr)
        return 2
    root = args.grade_root or os.environ.get("CRASHCOURSE_GRADE_ROOT") or "/grade"
    result = run_on_prairielearn(int(level), root, timeout=args.timeout, seed=args.seed, scenarios=args.scenarios)
    if result.get("gradable"):
        shown = f"score {result['score']:.2f}"
    else:
        shown = "not gradable: " + "; ".join(result["format_errors"])
    print(f"wrote {Path(root) / 'results' / 'results.json'} ({shown})", file=sys.stderr)
    return 0


def register(sub) -> None:
    run = sub.add_parser("prairielearn-run", help="(instructors) grade one submission in PrairieLearn's /grade layout",
                         description=RUN_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("--level", type=int, default=None)
    run.add_argument("--grade-root", default=None, metavar="DIR", help="default $CRASHCOURSE_GRADE_ROOT, else /grade")
    run.add_argument("--timeout", type=float, default=120.0)
    run.add_argument("--seed", type=int, default=None)
    run.add_argument("--scenarios", default=None, metavar="PATH")
    run.set_defaults(handler=_run)
