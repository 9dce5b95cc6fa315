"""crashcourse: crash an agent loop at every point and read what is left on disk.

The engine is a plain library with no pytest in it:

- :mod:`grader.engine.checkpoint`  the six-field checkpoint and the reference loop
- :mod:`grader.engine.scripted`  a scripted model and tools (no network, no key)
- :mod:`grader.engine.recorder`  records every operation with an effect outside the process
- :mod:`grader.engine.crash_models`  rebuilds the directory a crash would leave (M1 to M5)
- :mod:`grader.engine.invariants`  what must hold in every crash state
- :mod:`grader.engine.explore`  runs a loop under the recorder and checks every crash state

The pytest plugin, the CLI and the notebooks are thin faces over these.
"""

__version__ = "0.1.0"
