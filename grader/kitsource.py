"""The grader's own source as a folder pip can install: for the Gradescope zip, PrairieLearn's image
and a learner's workspace, so none of them needs the kit published on a package index.

It sits beside the four layers (like :mod:`grader.atomicfile`) and imports nothing of the kit but
its version: the learner's ``init`` uses it on every platform, the fleets' builders on Linux.
The files are the running package's ``*.py`` (never ``grader/kit/``, where a wheel keeps the course
material and the instructor's solutions) and a small ``pyproject.toml``.
"""

from __future__ import annotations

import json
from pathlib import Path

import grader

PYPROJECT = """\
# Written by crashcourse: installs the grader (and the course material beside it, if any).
[build-system]
requires = ["setuptools>=62.3"]
build-backend = "setuptools.build_meta"

[project]
name = "crashcourse"
version = "{version}"
requires-python = ">=3.10"
dependencies = {dependencies}

[project.scripts]
crashcourse = "grader.faces.cli:main"

[project.entry-points.pytest11]
crashcourse = "grader.faces.plugin"

[tool.setuptools.packages.find]
include = ["grader", "grader.*"]

[tool.setuptools.package-data]
grader = ["kit/**/*"]
"""


def dependencies() -> list:
    """The installed package's own requirements, extras left out (the grader needs none of them)."""
    from importlib import metadata
    try:
        requires = metadata.requires("crashcourse") or []
    except metadata.PackageNotFoundError:
        requires = []
    found = [r for r in requires if "extra ==" not in r.replace("extra==", "extra ==")]
    return found or ["pytest>=7.4", "hypothesis>=6.80", "nbformat>=5.9"]


def source_files() -> dict:
    """``{path inside the folder: bytes}``: ``pyproject.toml`` and ``grader/**/*.py``."""
    package = Path(grader.__file__).resolve().parent
    files: dict = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        if rel.parts[0] == "kit" or "__pycache__" in rel.parts:
            continue
        files[f"grader/{rel.as_posix()}"] = path.read_bytes()
    files["pyproject.toml"] = PYPROJECT.format(version=grader.__version__,
                                               dependencies=json.dumps(dependencies())).encode()
    return files
