"""One call at a time, in a fixed order, when a loop calls the model or its tools from threads.

A loop that runs a turn's tools from a thread pool makes its calls in whatever order the threads
happen to be scheduled, so the same code would leave a different trace, and could earn a different
verdict, on every run. The grader cannot make the loop sequential, but it can make its calls
arrive in the same order every time: a call from any thread other than the one that started the
run waits at this turnstile until no other call is running, no new call has arrived or finished
for a short quiet period (so every thread of the batch has had its chance to line up, and the
loop has had time to save what the last call returned), and it is the first of the waiting calls
in a fixed order (by what it asks for).

Calls from the run's own thread pass straight through: a loop without threads is never slowed.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

QUIET = 0.15  # seconds without arrivals or returns before the next waiting call may go


class Turnstile:
    def __init__(self, home: threading.Thread = None, quiet: float = QUIET):
        self.home = home or threading.current_thread()
        self.quiet = quiet
        self._cond = threading.Condition()
        self._waiting: list = []
        self._running = False
        self._last = time.monotonic()
        self._serial = 0

    def __call__(self, key: Any, fn: Callable[[], Any]) -> Any:
        if threading.current_thread() is self.home:
            return fn()
        with self._cond:
            self._serial += 1
            mine = (repr(key), self._serial)
            self._waiting.append(mine)
            self._last = time.monotonic()
            self._cond.notify_all()
            while True:
                idle = time.monotonic() - self._last
                if not self._running and min(self._waiting) == mine and idle >= self.quiet:
                    break
                self._cond.wait(max(self.quiet - idle, 0.01) if not self._running else None)
            self._waiting.remove(mine)
            self._running = True
        try:
            return fn()
        finally:
            with self._cond:
                self._running = False
                self._last = time.monotonic()
                self._cond.notify_all()
