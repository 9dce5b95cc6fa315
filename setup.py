"""Build step that puts the course material inside the package.

The repository's top-level folders (exercises/, lessons/, notebooks/, solutions/) stay the only
source. When a wheel is built, they are copied to ``grader/kit/`` in the build tree, so an
installed crashcourse can find its exercises without a checkout (grader/levels/manifest.py looks
there last). An editable install skips the copy: it reads the checkout itself.

``CRASHCOURSE_WITHOUT_SOLUTIONS=1 python -m build`` leaves solutions/ out, for a wheel handed to
students; ``crashcourse demo`` then says the solution column is the instructor's.
"""

import os
import shutil
from pathlib import Path

import setuptools
from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
KIT_FOLDERS = ("exercises", "lessons", "notebooks", "solutions")


def _wanted(path: Path) -> bool:
    # What a learner's runs leave behind in a checkout must not travel in a release.
    for part in path.parts:
        if part.startswith(".") or part in ("__pycache__", "checkpoints"):
            return False
    return not path.name.endswith((".pyc", ".pyo"))


class build_py_with_kit(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        folders = [f for f in KIT_FOLDERS
                   if not (f == "solutions" and os.environ.get("CRASHCOURSE_WITHOUT_SOLUTIONS") == "1")]
        target = Path(self.build_lib) / "grader" / "kit"
        if target.exists():
            shutil.rmtree(target)
        for folder in folders:
            source = HERE / folder
            if not source.is_dir():
                raise SystemExit(f"setup.py: {folder}/ is missing from {HERE}; the wheel would carry no course")
            for path in sorted(source.rglob("*")):
                rel = path.relative_to(HERE)
                if path.is_file() and _wanted(rel):
                    dest = target / rel
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, dest)


# setuptools 77 and later read the license as an SPDX expression (a table in pyproject.toml is
# deprecated there); older ones know only the free-text field.
LICENSE = {"license_expression": "MIT"} if int(setuptools.__version__.split(".")[0]) >= 77 else {"license": "MIT"}

setup(cmdclass={"build_py": build_py_with_kit}, **LICENSE)
