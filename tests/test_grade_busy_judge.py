"""A busy grading machine never costs correct code its points: the judge's own work is not the code's time.

Under ``crashcourse grade`` the learner's loop runs in a box and calls back into the judge for each
model and tool call; the judge answers after reading the kernel's trace of what the code did so
far. On a loaded machine (several batches, or a run that wrote a lot) those answers, and a box's
start, can take seconds. They used to count against the loop's time limit: at load 15, level 6's
correct journals were stopped "at call_model" in their 200-turn run and scored 1 of 10. Here the
judge is made slow on purpose, in a grading run started with a short loop limit, and correct code
must still earn full marks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.grading import bubblewrap

KIT = Path(__file__).resolve().parent.parent

# The judge, slowed: each model or tool call the box makes waits `pause` seconds in the judge, and each
# box takes `pause` seconds more to start. Then `crashcourse grade` runs as usual.
SLOW_JUDGE = """
import sys, time
import grader.grading.box as box
import grader.grading.stand_in as stand_in
pause = float(sys.argv[1])
serve, start = stand_in.RemoteFunction._serve_callback, box.Worker.__init__
def slow_serve(self, *args, **kwargs):
    time.sleep(pause)
    return serve(self, *args, **kwargs)
def slow_start(self, *args, **kwargs):
    time.sleep(pause)
    start(self, *args, **kwargs)
stand_in.RemoteFunction._serve_callback, box.Worker.__init__ = slow_serve, slow_start
from grader.faces.cli import main
sys.exit(main(["grade", *sys.argv[2:]]))
"""


@pytest.mark.bubblewrap
@pytest.mark.skipif(bubblewrap.check() is not None, reason="needs a bubblewrap box")
def test_a_slow_judge_is_not_charged_to_the_loop(tmp_path):
    subs = tmp_path / "subs"
    (subs / "solution").mkdir(parents=True)
    shutil.copy(KIT / "solutions" / "level2" / "agent.py", subs / "solution" / "agent.py")
    report = tmp_path / "report.json"
    # A 1.5 s limit for the loop, and 0.4 s of the judge's own work for each of the course task's eight
    # model and tool calls: 3.2 s of waiting on the judge in one run of a loop that itself takes milliseconds.
    env = dict(os.environ, CRASHCOURSE_LOOP_TIMEOUT="1.5")
    done = subprocess.run([sys.executable, "-c", SLOW_JUDGE, "0.4", str(subs), "--level", "2", "--examples", "1",
                           "--output", str(report), "--fresh", "--no-progress"],
                          capture_output=True, text=True, cwd=KIT, timeout=900, env=env)
    assert report.exists(), done.stderr[-3000:]
    got = json.loads(report.read_text())["submissions"][0]
    told = "\n".join(t["output"] for t in got["tests"] if t["status"] != "passed")
    assert (got["status"], got["score"]) == ("passed", 10.0), told[:2000]
