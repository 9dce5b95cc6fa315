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

import json
import os
import shutil
import tempfile
from typing import Optional

from grader.atomicfile import make_folder, write_atomic
from grader.grading.batch import grade_batch
from grader.grading.reports import checked_lines, failing
from grader.grading.reports import reason as first_reason

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
    elif failing(entry):
        message += f". Not passed: {', '.join(failing(entry))}. First reason: {first_reason(entry)}"
    return {"gradable": True, "score": (score / max_score) if max_score else 0.0, "message": message, "tests": tests}


CONTAINER = "the PrairieLearn container only"

DOCKERFILE = """\
# An external-grader image for PrairieLearn (or any fleet that runs one container per submission),
# written by `crashcourse prairielearn-image`. From the folder that holds this file and kit/:
#
#   docker build -t crashcourse-grader .
#
# In the question's info.json:
#   "externalGradingOptions": {{"enabled": true, "image": "crashcourse-grader", "timeout": 300,
#                              "entrypoint": "crashcourse prairielearn-run --level {level}"}}
# The container grades /grade/student and writes /grade/results/results.json. It needs no network.
# bubblewrap boxes the code where the container allows it, and strace takes the kernel's account of
# its file operations where ptrace is allowed; results.json says which of them held.

FROM python:3.12-slim
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends bubblewrap strace \\
    && rm -rf /var/lib/apt/lists/*
COPY kit /opt/crashcourse-kit
RUN pip install --no-cache-dir /opt/crashcourse-kit
ENV CRASHCOURSE_LEVEL={level}
CMD ["crashcourse", "prairielearn-run"]
"""


def write_image(folder: str, level: int) -> list:
    """Write ``folder/Dockerfile`` and ``folder/kit/`` (the grader and the level, as the Gradescope
    zip carries them), so ``docker build folder`` works from a wheel as from a clone. Returns the paths."""
    from grader.grading.gradescope import package_files

    written = []
    files = {f"kit/{name}": data for name, data in package_files(level).items()}
    files["Dockerfile"] = DOCKERFILE.format(level=level).encode()
    for name, data in sorted(files.items()):
        path = os.path.join(folder, *name.split("/"))
        make_folder(os.path.dirname(path))
        write_atomic(path, data, durable=False)
        written.append(path)
    return written


def run_on_prairielearn(level: int, grade_root: str, *, timeout: float = 120.0, seed: Optional[int] = None,
                        scenarios: Optional[str] = None) -> dict:
    """Grade ``grade_root/student``; write and return ``grade_root/results/results.json``'s content.

    A results.json is always written: where no box can start (Docker's default seccomp profile
    refuses the namespaces one needs), the code runs in the container without one and the result
    says the grade is not tamper-proof; where the grader itself fails, the result says that."""
    student = os.path.join(grade_root, "student")
    results = os.path.join(grade_root, "results", "results.json")
    if not os.path.isdir(student):
        result = {"gradable": False, "score": 0.0, "format_errors": [f"no submission folder at {student}"]}
    else:
        try:
            with tempfile.TemporaryDirectory(prefix="crashcourse-prairielearn-") as folder:
                shutil.copytree(student, os.path.join(folder, "student"), symlinks=True)
                batch = grade_batch(folder, level, jobs=1, timeout=timeout, seed=seed, scenarios=scenarios,
                                    unboxed=CONTAINER, require_box=False)
            result = prairielearn_result(batch["submissions"][0])
            if result.get("gradable"):
                result["message"] = "\n".join([result["message"]] + checked_lines(batch))
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - PrairieLearn must always get a results.json
            reason = f"the grader failed before it could grade this submission ({type(exc).__name__}: {exc})"
            result = {"gradable": False, "score": 0.0, "format_errors": [reason], "message": reason}
    make_folder(os.path.dirname(results))
    write_atomic(results, json.dumps(result, indent=2, ensure_ascii=False))
    return result
