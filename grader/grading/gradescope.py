"""Grading on Gradescope's machines: the autograder zip, and what runs inside it.

Gradescope unpacks the zip into ``/autograder/source``, runs ``setup.sh`` once when the image is
built, then ``run_autograder`` for each student with their files in ``/autograder/submission``;
whatever ``/autograder/results/results.json`` holds afterwards is the student's result
(https://gradescope-autograders.readthedocs.io/en/latest/specs/).

The zip carries the kit (``grader/``, ``pyproject.toml``), the level's folder (tests, README,
hints) and, if given, the instructor's seed and scenarios. It never carries ``solutions/``.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Callable, Optional

from grader.atomicfile import make_folder, write_atomic
from grader.grading.reports import gradescope_result, write_gradescope_result

KIT_ROOT = Path(__file__).resolve().parents[2]

SETUP_SH = """#!/usr/bin/env bash
# Runs once, when Gradescope builds the autograder image.
set -euo pipefail
apt-get update -qq
apt-get install -y -qq python3 python3-pip python3-venv > /dev/null
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install --quiet /autograder/source/kit
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Runs once per submission; writes /autograder/results/results.json.
set -uo pipefail
mkdir -p /autograder/results
cd /autograder/source/kit
exec /autograder/venv/bin/python -m grader gradescope-run --level {level} --timeout {timeout:g} {extra}\\
  --submission /autograder/submission --results /autograder/results/results.json
"""


def build_package(level: int, output: str, *, seed: Optional[int] = None, scenarios: Optional[str] = None,
                  timeout: float = 120.0) -> str:
    """Write the autograder zip for ``level`` to ``output``."""
    extra = ""
    if seed is not None:
        extra += f"--seed {int(seed)} "
    if scenarios:
        extra += f"--scenarios /autograder/source/{Path(scenarios).name} "
    files: dict[str, bytes] = {
        "setup.sh": SETUP_SH.encode(),
        "run_autograder": RUN_AUTOGRADER.format(level=level, timeout=timeout, extra=extra).encode(),
    }
    for name in ("pyproject.toml", "README.md"):
        if (KIT_ROOT / name).exists():
            files[f"kit/{name}"] = (KIT_ROOT / name).read_bytes()
    for path in sorted((KIT_ROOT / "grader").rglob("*.py")):
        files[f"kit/{path.relative_to(KIT_ROOT).as_posix()}"] = path.read_bytes()
    level_dir = KIT_ROOT / "exercises" / f"level{level}"
    for path in sorted(level_dir.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            files[f"kit/exercises/level{level}/{path.relative_to(level_dir)}"] = path.read_bytes()
    if scenarios:
        files[Path(scenarios).name] = Path(scenarios).read_bytes()
    # Built in memory (the kit is a few hundred KiB), then written whole: a kill mid-build never
    # leaves a zip that Gradescope would reject at upload time, nor destroys the previous one.
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            executable = name in ("setup.sh", "run_autograder")
            info.external_attr = ((0o755 if executable else 0o644) | stat.S_IFREG) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    write_atomic(output, buffer.getvalue())
    return output


def run_on_gradescope(level: int, submission: str, results: str, *, grade_batch: Callable[..., dict],
                      seed: Optional[int] = None, scenarios: Optional[str] = None, timeout: float = 120.0) -> int:
    """Grade the one submission Gradescope hands over (with ``grade_batch``, which
    :mod:`grader.grading.batch` passes in) and write its results.json."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="crashcourse-gradescope-") as folder:
        shutil.copytree(submission, os.path.join(folder, "student"), symlinks=True)
        batch = grade_batch(folder, level, jobs=1, timeout=timeout, seed=seed, scenarios=scenarios)
    entry = batch["submissions"][0]
    result = gradescope_result(entry, time.monotonic() - started)
    make_folder(os.path.dirname(os.path.abspath(results)))
    write_gradescope_result(results, result)
    return 0
