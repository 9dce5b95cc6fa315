"""The ordered exercise manifest (``exercises/manifest.json``), read by every student command.

One entry per level, in order: its number, a short unique name, a title, the folder of the
starter and of the solution, the contract file names, the test files, the README and hints files,
what the shipped starter is planted to break, the crash models its tests use, and the level module
(:mod:`grader.levels.interface`) that draws its crash matrix and declares its checks. Paths are relative to the kit's root (the folder holding ``exercises/``).

A level whose folder is not there yet is still listed; commands say so instead of failing.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from grader.levels.interface import LevelModule, LevelModuleError, load_level_module

MANIFEST_PATH = Path("exercises") / "manifest.json"
REQUIRED = ("number", "name", "title", "folder", "solution", "files", "tests", "readme", "hints", "module",
            "planted", "crash_models")


class ManifestError(Exception):
    """The manifest is missing, unreadable, or names a level it does not have."""


class LevelMissing(ManifestError):
    """The level is in the manifest, but its folder is not in this copy of the kit yet."""


@dataclass(frozen=True)
class Level:
    number: int
    name: str
    title: str
    folder: str
    solution: str
    files: tuple
    tests: tuple
    readme: str
    hints: str
    module: str          # the level module, a dotted import path (grader.levels.interface)
    function: str
    planted: tuple
    crash_models: tuple
    answers: Optional[str] = None
    root: Path = field(default=Path("."), compare=False)
    # (earlier level, what this level's starter gives away of its solution): `handout` and `init` say it
    reveals: tuple = ()

    @property
    def plugin(self) -> LevelModule:
        """The level module's ``LEVEL``: its checks, matrix column and demo words."""
        return load_level_module(self.module)

    @property
    def label(self) -> str:
        return f"Level {self.number}: {self.title}"

    @property
    def starter_dir(self) -> Path:
        return self.root / self.folder

    @property
    def solution_dir(self) -> Path:
        return self.root / self.solution

    def exists(self) -> bool:
        """True once the level's starter folder holds its contract files."""
        return all((self.starter_dir / name).is_file() for name in self.files)

    def missing_message(self) -> str:
        if not self.starter_dir.is_dir():
            return (f"Level {self.number} ({self.title}) is not in this copy of the kit yet: there is no "
                    f"{self.folder}/ folder. Pull the latest kit, or pick another level (crashcourse demo lists them).")
        absent = [name for name in self.files if not (self.starter_dir / name).is_file()]
        return (f"Level {self.number} ({self.title}) is not complete yet: {self.folder}/ has no "
                f"{', '.join(absent)}. Pull the latest kit, or pick another level.")

    def test_paths(self) -> list[Path]:
        """The level's test files: those the manifest lists, else any ``test_*.py`` in the folder."""
        listed = [self.starter_dir / name for name in self.tests if (self.starter_dir / name).is_file()]
        return listed or sorted(self.starter_dir.glob("test_*.py"))

    def answers_reminder(self, folder: Optional[Path] = None) -> str:
        """What a learner whose tests all pass is told about this level's written answers, in
        ``folder`` (default: the starter folder); "" for a level without any."""
        if not self.answers:
            return ""
        path = (Path(folder) if folder is not None else self.starter_dir) / self.answers
        try:
            shown = os.path.relpath(path)
        except ValueError:  # another drive, on Windows
            shown = str(path)
        if shown.startswith(os.pardir):
            shown = str(path)
        return (f"One more thing: {shown} asks a few questions in your own words. The tests do not read it; "
                "your instructor does, so answer it before you hand the level in.")

    def watched_files(self, folder: Optional[Path] = None) -> list[Path]:
        """The files a student edits for this level, in ``folder`` (default: the starter folder)."""
        folder = Path(folder) if folder is not None else self.starter_dir
        names = list(self.files) + ([self.answers] if self.answers else [])
        return [folder / name for name in names]


@dataclass
class Manifest:
    root: Path
    levels: list
    # A student's workspace (``crashcourse init``): its solutions stay with the instructor.
    workspace: bool = False

    def level(self, number: int) -> Level:
        for level in self.levels:
            if level.number == number:
                return level
        known = ", ".join(str(lv.number) for lv in self.levels)
        raise ManifestError(f"There is no level {number}. The levels are {known}.")

    def require(self, number: int) -> Level:
        """The level, or :class:`LevelMissing` with a learner's message if its files are not there yet."""
        level = self.level(number)
        if not level.exists():
            raise LevelMissing(level.missing_message())
        return level

    def existing(self) -> list:
        return [level for level in self.levels if level.exists()]


# Where the course material is, in the order it is looked for. A checkout keeps it in its top-level
# folders; a wheel carries a copy under grader/kit/ (setup.py puts it there at build time).
SOURCE_CHECKOUT = Path(__file__).resolve().parents[2]
PACKAGED_KIT = Path(__file__).resolve().parents[1] / "kit"


def package_root() -> Path:
    """The kit that came with this installed package, whatever the current folder is.

    ``CRASHCOURSE_ROOT`` if set; else the checkout the package was installed from (an editable
    install); else the copy inside the package (a wheel). Instructor commands and ``crashcourse
    init`` start from here, so a student's workspace never stands in for the instructor's kit.
    """
    env = os.environ.get("CRASHCOURSE_ROOT")
    if env:
        return Path(env).resolve()
    if (SOURCE_CHECKOUT / MANIFEST_PATH).is_file():
        return SOURCE_CHECKOUT
    if (PACKAGED_KIT / MANIFEST_PATH).is_file():
        return PACKAGED_KIT
    return SOURCE_CHECKOUT


def find_root(start: Optional[Path] = None) -> Path:
    """The kit a student command reads: ``CRASHCOURSE_ROOT`` if set, else the nearest folder at or
    above ``start`` (default: cwd) holding the manifest (a checkout, or a workspace made by
    ``crashcourse init``), else the kit that came with the package (:func:`package_root`)."""
    env = os.environ.get("CRASHCOURSE_ROOT")
    if env:
        return Path(env).resolve()
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / MANIFEST_PATH).is_file():
            return folder
    return package_root()


def load(root: Optional[Path] = None) -> Manifest:
    root = Path(root) if root is not None else find_root()
    path = root / MANIFEST_PATH
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestError(f"There is no {MANIFEST_PATH} under {root}. Run crashcourse from inside the kit's folder "
                            "(a clone, or a workspace made by `crashcourse init`), or set CRASHCOURSE_ROOT to it. "
                            "An installed crashcourse carries its own copy; if it has none, reinstall it from a "
                            "wheel or a clone.") from None
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    levels = []
    for i, entry in enumerate(raw.get("levels", [])):
        missing = [key for key in REQUIRED if key not in entry]
        if missing:
            raise ManifestError(f"{path}: level entry {i + 1} lacks {', '.join(missing)}")
        levels.append(Level(
            number=int(entry["number"]), name=str(entry["name"]), title=str(entry["title"]),
            folder=str(entry["folder"]), solution=str(entry["solution"]), files=tuple(entry["files"]),
            tests=tuple(entry["tests"]), readme=str(entry["readme"]), hints=str(entry["hints"]),
            module=str(entry["module"]), function=str(entry.get("function") or ""),
            planted=tuple(entry["planted"]), crash_models=tuple(entry["crash_models"]),
            answers=entry.get("answers"), root=root,
            reveals=tuple(sorted((int(k), str(v)) for k, v in (entry.get("reveals") or {}).items()))))
    return Manifest(root, levels, workspace=bool(raw.get("workspace")))


def problems(manifest: Manifest) -> list[str]:
    """What is wrong with the manifest itself: order, unique names, known engines, non-empty lists."""
    out = []
    numbers = [level.number for level in manifest.levels]
    if not numbers:
        out.append("the manifest lists no levels")
    if numbers != list(range(1, len(numbers) + 1)):
        out.append(f"levels must be numbered 1, 2, 3, ... in order; the manifest has {numbers}")
    for key in ("number", "name", "title", "folder", "solution"):
        values = [getattr(level, key) for level in manifest.levels]
        dupes = sorted({str(v) for v in values if values.count(v) > 1})
        if dupes:
            out.append(f"two levels share a {key}: {', '.join(dupes)}")
    for level in manifest.levels:
        if not level.files:
            out.append(f"level {level.number} lists no files")
        if not level.tests:
            out.append(f"level {level.number} lists no test files")
        try:
            _ = level.plugin  # importing the level's module is the check
        except LevelModuleError as exc:
            out.append(f"level {level.number}: {exc}")
        # `crashcourse grade` lists a shipped answers.md for manual review; `check` reminds the learner
        # of the one the manifest names. The two must be the same file.
        if level.starter_dir.is_dir():
            if level.answers and not (level.starter_dir / level.answers).is_file():
                out.append(f"level {level.number} names {level.answers!r} as its written answers, but "
                           f"{level.folder}/ has no such file")
            if not level.answers and (level.starter_dir / "answers.md").is_file():
                out.append(f"level {level.number} ships answers.md, which grade lists for manual review, but its "
                           "\"answers\" is null, so check never reminds the learner to write it")
        if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", level.name):
            out.append(f"level {level.number}'s name {level.name!r} should be lowercase words joined by '-'")
    return out


# --- the level's README tasks and its hints (formats in the kit's conventions) -------------------

TASK_HEADING = re.compile(r"^##\s+(\d+)\.\s+(.+?)\s*$")


def readme_tasks(path: Path) -> list[tuple[int, str]]:
    """``[(number, title)]`` of the ``## N. Title`` headings of a level README, in order."""
    if not path.is_file():
        return []
    return [(int(m.group(1)), m.group(2)) for line in path.read_text(encoding="utf-8").splitlines()
            if (m := TASK_HEADING.match(line))]


@dataclass
class TaskHints:
    number: int
    title: str
    steps: list  # question, pointer, API (three, in that order)
    # The causes of failure (keys of grader.engine.invariants.CAUSES) these hints are about, from a
    # `<!-- causes: a, b -->` line in the task's section: a failure with one of them leads here.
    causes: list = field(default_factory=list)
    # Ladders of their own for the common causes, from `### Cause: KEY (words)` subsections: a failure
    # with that cause starts from a question about it rather than the task's general one.
    by_cause: dict = field(default_factory=dict)

    def ladder(self, cause: str) -> list:
        """The steps to show for a failure with ``cause``: its own ladder if it has one, else the task's."""
        return self.by_cause.get(cause) or self.steps


CAUSES_LINE = re.compile(r"^<!--\s*causes:\s*(.*?)\s*-->\s*$")
CAUSE_HEADING = re.compile(r"^###\s+Cause:\s*([a-z0-9-]+)")


def hint_task_for(tasks: list, causes: list, failing: Optional[int]) -> Optional[int]:
    """The task whose hints fit a failure: the first of ``causes`` that some task's hints are about
    decides; without one, the failing task ``failing``."""
    for cause in causes:
        for task in tasks:
            if cause in task.causes:
                return task.number
    return failing


def parse_hints(path: Path) -> list[TaskHints]:
    """The tasks of a ``hints.md``: ``## N. Title`` followed by its ``- `` bullets.

    A bullet may continue on indented lines below it; they join into one step.
    """
    tasks: list[TaskHints] = []
    if not path.is_file():
        return tasks
    steps: list = []   # where bullets go: the task's own ladder, or the cause subsection's
    for line in path.read_text(encoding="utf-8").splitlines():
        heading = TASK_HEADING.match(line)
        if heading:
            tasks.append(TaskHints(int(heading.group(1)), heading.group(2), []))
            steps = tasks[-1].steps
        elif tasks and CAUSE_HEADING.match(line):
            cause = CAUSE_HEADING.match(line).group(1)
            steps = tasks[-1].by_cause.setdefault(cause, [])
            if cause not in tasks[-1].causes:   # a cause with a ladder here leads here
                tasks[-1].causes.append(cause)
        elif tasks and CAUSES_LINE.match(line):
            tasks[-1].causes.extend(c.strip() for c in CAUSES_LINE.match(line).group(1).split(",") if c.strip())
        elif tasks and line.startswith("- "):
            steps.append(line[2:].strip())
        elif tasks and steps and line.startswith((" ", "\t")) and line.strip():
            steps[-1] += " " + line.strip()
    return tasks


TASK_MARKER = re.compile(r"mark\.task\(\s*(?:taskno\s*=\s*)?(\d+)")


def test_task_numbers(paths: list[Path]) -> set[int]:
    """The task numbers the level's tests are marked with (``@pytest.mark.task(taskno=N)``)."""
    found: set[int] = set()
    for path in paths:
        if path.is_file():
            found.update(int(n) for n in TASK_MARKER.findall(path.read_text(encoding="utf-8")))
    return found
