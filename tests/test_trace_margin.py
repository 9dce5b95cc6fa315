"""The solutions stay well inside the kernel trace's cap under ``crashcourse grade``.

Every byte the box writes is printed in its worker's kernel trace (grader.grading.kernel_trace), and
the judge stops a run whose trace passes the box's cap (64 MiB), the worker's own messages to the
judge aside (``FLOOD``), or that reaches the tracer's larger cap on the whole trace (``Limits.trace``).
The kit itself makes a run write: each crash state is loaded, and each resume run, in a fresh process
whose answer goes to the judge. When those answers were counted, the level-6 solution used some 28 of
the 64 MiB, and a correct submission a little wordier than it was stopped with nothing scored.

Here each solution is graded with the judge's cap cut to a share of itself: full marks then mean the
solution leaves that much room (a ratio, not a size measured on this machine). The sizes each worker's
trace reached are written down by the judge, and checked against the tracer's own cap the same way.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.grading import bubblewrap, sandbox

pytestmark = [pytest.mark.bubblewrap, pytest.mark.strace]

KIT = Path(__file__).resolve().parents[1]

# Run as `python -c DRIVER share log level submissions report`: the judges are forked from it, so each
# worker's KernelTrace counts against `share` of its cap, and writes what its trace held when closed.
DRIVER = r"""
import os, sys
from grader.grading import kernel_trace
share, log = float(sys.argv[1]), sys.argv[2]
init, close = kernel_trace.KernelTrace.__init__, kernel_trace.KernelTrace.close

def cut(self, scratch, keep_calls=False, cap=kernel_trace.STRING_LIMIT):
    init(self, scratch, keep_calls, cap=int(cap * share))

def noted(self):
    if self.fd >= 0:
        self._read()
        with open(os.path.join(log, f"{os.getpid()}-{id(self)}"), "w") as out:
            out.write(f"{os.fstat(self.fd).st_size} {self.read_at - self.kit_text} {int(self.flooded)}")
    close(self)

kernel_trace.KernelTrace.__init__, kernel_trace.KernelTrace.close = cut, noted
from grader.faces.cli import main
sys.exit(main(["grade", sys.argv[4], "--level", sys.argv[3], "--output", sys.argv[5], "--no-progress"]))
"""

SOLUTIONS = {2: "agent.py", 4: "resume.py", 6: "agent.py"}
# Levels 2 and 6 keep three quarters of the cap free. Level 4's resume runs each write the solution's
# own checkpoint again (some 13 MiB of trace in all, the learner's writes, counted), so a third.
SHARE = {2: 0.25, 4: 1 / 3, 6: 0.25}


@pytest.mark.parametrize("level", sorted(SOLUTIONS))
def test_a_solution_leaves_room_under_the_trace_cap(tmp_path, grading_env, level):
    name = SOLUTIONS[level]
    subs = tmp_path / "subs"
    (subs / "solution").mkdir(parents=True)
    shutil.copy(KIT / "solutions" / f"level{level}" / name, subs / "solution" / name)
    log = tmp_path / "log"
    log.mkdir()
    os.chmod(log, 0o1777)  # the judge writes as the box's uid when grading as root
    report = tmp_path / "report.json"
    assert bubblewrap.check() is None, bubblewrap.check()
    done = subprocess.run([sys.executable, "-c", DRIVER, str(SHARE[level]), str(log), str(level), str(subs),
                           str(report)], capture_output=True, text=True, cwd=KIT, timeout=900,
                          env=grading_env(tmp_path / "tmp"))
    assert done.returncode == 0, done.stderr[-3000:]
    entry = json.loads(report.read_text())["submissions"][0]
    assert (entry["status"], entry.get("error")) == ("passed", None), entry
    assert entry["score"] == entry["max_score"] > 0
    sizes = [tuple(int(n) for n in f.read_text().split()) for f in log.iterdir()]
    assert sizes, "no worker's trace was written down: the grade ran without the kernel trace"
    limits = sandbox.Limits()
    for whole, counted, flooded in sizes:
        assert not flooded
        assert counted <= limits.file_size * SHARE[level]
        assert whole <= limits.trace / 4
