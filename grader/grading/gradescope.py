"""Grading on Gradescope's machines: the autograder zip, and what runs inside it.

Gradescope unpacks the zip into ``/autograder/source``, runs ``setup.sh`` once when the image is
built, then ``run_autograder`` for each student with their files in ``/autograder/submission``;
whatever ``/autograder/results/results.json`` holds afterwards is the student's result
(https://gradescope-autograders.readthedocs.io/en/latest/specs/).

The zip is built from the installed package, so it works the same from a wheel as from a clone:
``kit/`` holds the package's own ``grader/`` code, the manifest and the level's folder (tests,
README, hints) under ``grader/kit/`` where an installed package keeps them, and a small
``pyproject.toml`` that installs it all. If given, the instructor's seed and scenarios come too.
It never carries ``solutions/``.

The seed is never on ``run_autograder``'s command line, nor the instructor's own number: the zip
holds ``private.json`` with a 64-bit seed derived from it and a random salt (:func:`derive_seed`),
so code that draws the kit's conversations cannot search the seed's space, and ``gradescope-run``
reads that file and removes it before any submission's code runs. Gradescope starts a container
for each submission from the image, so each run reads it once; without a box the code runs as
root in that container, and only the file's absence keeps the seed from it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import secrets
import shutil
import stat
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Callable, Optional

from grader import kitsource
from grader.atomicfile import make_folder, write_atomic
from grader.grading.reports import gradescope_result, write_gradescope_result
from grader.levels.manifest import package_root

# The instructor's kit: a checkout, or the copy a wheel carries (never a student's workspace).
KIT_ROOT = package_root()

SETUP_SH = """#!/usr/bin/env bash
# Runs once, when Gradescope builds the autograder image.
set -euo pipefail
apt-get update -qq
apt-get install -y -qq python3 python3-pip python3-venv bubblewrap strace > /dev/null
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install --quiet /autograder/source/kit
# The instructor's seed: root's alone (gradescope-run reads it, and removes it, before any code runs).
if [ -f /autograder/source/private.json ]; then chmod 600 /autograder/source/private.json; fi
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Runs once per submission; writes /autograder/results/results.json.
set -uo pipefail
mkdir -p /autograder/results
cd /autograder/source/kit
exec /autograder/venv/bin/python -m grader gradescope-run --level {level} --timeout {timeout:g} {extra}\\
  --submission /autograder/submission --results /autograder/results/results.json
"""


def package_files(level: int) -> dict:
    """``{path in the zip's kit/ folder: bytes}``: the running package's code and the level it grades."""
    files = kitsource.source_files()
    kit_manifest = KIT_ROOT / "exercises" / "manifest.json"
    if kit_manifest.is_file():
        files["grader/kit/exercises/manifest.json"] = kit_manifest.read_bytes()
    level_dir = KIT_ROOT / "exercises" / f"level{level}"
    if not level_dir.is_dir():
        raise SystemExit(f"crashcourse gradescope-package: there is no exercises/level{level}/ in {KIT_ROOT}")
    for path in sorted(level_dir.rglob("*")):
        rel = path.relative_to(level_dir)
        leftover = {"__pycache__", "checkpoints"} & set(rel.parts) or any(p.startswith(".") for p in rel.parts)
        if path.is_file() and not leftover:
            files[f"grader/kit/exercises/level{level}/{rel.as_posix()}"] = path.read_bytes()
    return files


PRIVATE = "private.json"  # in the zip's root, beside run_autograder: {"seed": the derived seed}
PRIVATE_PATH = "/autograder/source/" + PRIVATE


def derive_seed(seed: int, salt: str) -> int:
    """The seed a package grades with: 64 bits from the instructor's ``seed`` and a random ``salt``. An
    instructor's number is often small (7, a year); drawn from 2**64, the seed cannot be found by
    trying seeds until one draws the conversation the code was given."""
    return int.from_bytes(hashlib.sha256(f"crashcourse:{int(seed)}:{salt}".encode()).digest()[:8], "big")


def packaged_seed(zip_path: str) -> Optional[int]:
    """The seed a built package grades with (its private.json), or None if it was built without one."""
    with zipfile.ZipFile(zip_path) as z:
        if PRIVATE not in z.namelist():
            return None
        return int(json.loads(z.read(PRIVATE))["seed"])


def read_private(path: str) -> dict:
    """The options ``run_autograder`` keeps off its command line, read once: the file is removed at once,
    before any submission's code runs (raises OSError if it is not there)."""
    with open(path, "rb") as f:
        data = json.loads(f.read())
    os.unlink(path)
    return {"seed": int(data["seed"])}


def build_package(level: int, output: str, *, seed: Optional[int] = None, scenarios: Optional[str] = None,
                  timeout: float = 120.0) -> str:
    """Write the autograder zip for ``level`` to ``output`` (with ``seed``: see :func:`derive_seed`)."""
    extra = ""
    files: dict[str, bytes] = {}
    if seed is not None:
        extra += f"--private {PRIVATE_PATH} "
        files[PRIVATE] = json.dumps({"seed": derive_seed(seed, secrets.token_hex(16))}).encode()
    if scenarios:
        extra += f"--scenarios /autograder/source/{Path(scenarios).name} "
    files.update({
        "setup.sh": SETUP_SH.encode(),
        "run_autograder": RUN_AUTOGRADER.format(level=level, timeout=timeout, extra=extra).encode(),
    })
    for name, data in package_files(level).items():
        files[f"kit/{name}"] = data
    if scenarios:
        files[Path(scenarios).name] = Path(scenarios).read_bytes()
    # Built in memory (the kit is a few hundred KiB), then written whole: a kill mid-build never
    # leaves a zip that Gradescope would reject at upload time, nor destroys the previous one.
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            executable = name in ("setup.sh", "run_autograder")
            mode = 0o755 if executable else 0o600 if name == PRIVATE else 0o644
            info.external_attr = (mode | stat.S_IFREG) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    write_atomic(output, buffer.getvalue())
    return output


def run_on_gradescope(level: int, submission: str, results: str, *, grade_batch: Callable[..., dict],
                      seed: Optional[int] = None, scenarios: Optional[str] = None, timeout: float = 120.0) -> int:
    """Grade the one submission Gradescope hands over (with ``grade_batch``, which
    :mod:`grader.grading.batch` passes in) and write its results.json."""
    started = time.monotonic()
    # Gradescope gives each submission a container of its own, where Docker's seccomp profile may
    # refuse the namespaces a box needs: then the code runs in that container without a box, and
    # the student's output says so.
    with tempfile.TemporaryDirectory(prefix="crashcourse-gradescope-") as folder:
        shutil.copytree(submission, os.path.join(folder, "student"), symlinks=True)
        batch = grade_batch(folder, level, jobs=1, timeout=timeout, seed=seed, scenarios=scenarios,
                            unboxed="the Gradescope container only", require_box=False)
    entry = batch["submissions"][0]
    result = gradescope_result(entry, time.monotonic() - started, batch.get("isolation"),
                               batch.get("kernel_trace", False))
    make_folder(os.path.dirname(os.path.abspath(results)))
    write_gradescope_result(results, result)
    return 0
