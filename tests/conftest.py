"""Shared fixtures for the kit's own tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import grader.engine.fresh  # noqa: F401 - its fork server starts before the first learner file is imported
from grader.engine.loader import import_file

pytest_plugins = ["pytester"]

# What a test needs of the machine beyond Python. Each such test carries its marker, and also gets
# "system", so `pytest -m "not system"` is the fast inner loop (CONTRIBUTING.md says how fast).
SYSTEM_MARKERS = {
    "bubblewrap": "needs the bubblewrap box (bwrap) that crashcourse grade runs each submission in",
    "strace": "needs strace: the kernel's account of a run, or faults injected by the kernel",
    "notebook": "runs a notebook in a fresh Jupyter kernel (nbclient, ipykernel)",
    "wheel": "builds the sdist and the wheel",
}


def pytest_configure(config: pytest.Config) -> None:
    # The commands wrap their words to the terminal's width (grader/faces/matrix.py: terminal_width),
    # and tests read those words: one width for every run, whatever the terminal (an 80-column one
    # split "no longer breaks" over two lines) or a worker process that sees no terminal and falls back to 80 columns.
    os.environ["COLUMNS"] = "100"
    os.environ.pop("LINES", None)
    for name, why in SYSTEM_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {why}")
    config.addinivalue_line("markers", "system: needs one of " + ", ".join(SYSTEM_MARKERS) + " (added for you)")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """``pytest -n 2`` (pytest-xdist, in the ``dev`` extra) runs the kit's own tests on two workers,
    whole files to a worker, so each file's module-scoped grading runs once (xdist's default hands
    out single tests, and each worker would grade a file's batch again), heaviest files first.

    A learner's ``pytest exercises/levelN`` never reads this file. ``--dist`` given chooses otherwise."""
    if (not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput")
            or not config.option.numprocesses or config.option.dist != "no"):
        return
    config.option.dist = "loadfile"
    config.option.loadscopereorder = False  # by weight, not by count of tests: see _heaviest_first


# The files that take longest, in that order (one worker's seconds, measured with -n 2 on the 2-core
# machine), handed out first so that no long file is left to run alone at the end.
HEAVY_FILES = ["test_level4.py", "test_one_verdict.py", "test_grade_kernel.py", "test_level1.py", "test_level6.py",
               "test_grade_hostile.py", "test_causes.py", "test_grade_hostile5.py", "test_grade_round4.py",
               "test_packaging.py", "test_grade_round5.py", "test_grade_levels.py", "test_trace_margin.py",
               "test_hang.py", "test_level3.py", "test_fresh.py"]


def _heaviest_first(items: list) -> None:
    rank = {name: i for i, name in enumerate(HEAVY_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file keeps its order


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    if hasattr(config, "workerinput"):
        _heaviest_first(items)
    # The exhaustive runs (marked "slow", about half an hour on two cores) run only when the marker
    # expression asks for them by name (`pytest -m slow`); a bare `pytest`, CI's, skips them.
    slow_asked = "slow" in (config.getoption("markexpr") or "")
    for item in items:
        if any(item.get_closest_marker(name) for name in SYSTEM_MARKERS):
            item.add_marker(pytest.mark.system)
        if item.get_closest_marker("slow") and not slow_asked:
            item.add_marker(pytest.mark.skip(reason="exhaustive: run it with `pytest -m slow`"))


@pytest.fixture
def load_module():
    """``load_module(path, tag="test")``: import a file as a fresh module, through the kit's one loader
    (:func:`grader.engine.loader.import_file`), as the plugin, the matrix and the grader do."""
    return import_file


def _grading_env(folder: Path) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    return dict(os.environ, TMPDIR=str(folder))


@pytest.fixture(scope="session")
def grading_env():
    """``grading_env(folder)``: os.environ with TMPDIR set to ``folder`` (created), for a grading run of
    a test's own. Its sandboxes, and the checks that nothing is left behind, then never meet another
    grading run on the machine."""
    return _grading_env


def _path_without(folder: Path, *tools: str) -> str:
    """A PATH on which ``tools`` (say bwrap, strace) cannot be found and everything else can: each
    other command of the current PATH gets a link in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for entry in reversed(os.environ.get("PATH", "").split(os.pathsep)):
        if not entry or not os.path.isdir(entry):
            continue
        for name in os.listdir(entry):
            if name in tools:
                continue
            link = folder / name
            if link.is_symlink():
                link.unlink()
            link.symlink_to(os.path.join(entry, name))
    return str(folder)


@pytest.fixture(scope="session")
def path_without():
    """``path_without(folder, "bwrap", "strace")``: a PATH value that hides those commands, to grade
    as on a machine that lacks them."""
    return _path_without
