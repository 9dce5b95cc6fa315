"""Shared fixtures for the kit's own tests."""

from __future__ import annotations

import pytest

from grader.engine.loader import import_file

pytest_plugins = ["pytester"]


@pytest.fixture
def load_module():
    """``load_module(path, tag="test")``: import a file as a fresh module, through the kit's one loader
    (:func:`grader.engine.loader.import_file`), as the plugin, the matrix and the grader do."""
    return import_file
