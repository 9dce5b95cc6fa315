"""crashcourse: crash an agent loop at every point and read what is left on disk.

The engine is a plain library with no pytest in it:

- :mod:`grader.engine.checkpoint`  the six-field checkpoint and the reference loop
- :mod:`grader.engine.scripted`  a scripted model and tools (no network, no key)
- :mod:`grader.engine.recorder`  records every operation with an effect outside the process
- :mod:`grader.engine.crash_models`  rebuilds the directory a crash would leave (M1 to M5)
- :mod:`grader.engine.invariants`  what must hold in every crash state
- :mod:`grader.engine.explore`  runs a loop under the recorder and checks every crash state

The pytest plugin, the CLI and the notebooks are thin faces over these (see ARCHITECTURE.md).

The public API is what the README offers, re-exported here (everything else may change):

- ``crash_explorer``  the pytest fixture for any project's own file-writing code
- ``explore_writes``  the same exploration without pytest; it returns a ``FileCrashes``
- ``report_contract``  a batch of grades in the JSON shape ``crashcourse grade --format json``
  prints, which other tools may rely on

Names are loaded when first used: ``import grader`` stays cheap (the sandboxed worker imports
this package on every start) and never imports pytest.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

__all__ = ["FileCrashes", "crash_explorer", "explore_writes", "report_contract", "__version__"]

# public name -> (module, name in it)
_PUBLIC = {
    "crash_explorer": ("grader.faces.plugin", "crash_explorer"),
    "explore_writes": ("grader.engine.explore", "explore_writes"),
    "FileCrashes": ("grader.engine.explore", "FileCrashes"),
    "report_contract": ("grader.grading.reports", "contract"),
}


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'grader' has no attribute {name!r}")
    module, attr = _PUBLIC[name]
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value  # once loaded, an ordinary attribute
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))
