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


def _retrying_forever(target: Path) -> None:
    """The solution, with the tool_result naming the wrong call (the model refuses every request after
    the first tool) and each model call retried on any error without end: a loop that only calls."""
    text = (KIT / "solutions" / "level2" / "agent.py").read_text(encoding="utf-8")
    text = text.replace('def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):', '''def _ask(call_model, **kwargs):
    while True:  # retry on any API error, with no limit
        try:
            return call_model(**kwargs)
        except Exception:
            continue


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):''')
    text = text.replace('response = call_model(tools=tools, messages=state["messages"])',
                        'response = _ask(call_model, tools=tools, messages=state["messages"])')
    text = text.replace('"tool_use_id": block["id"]', '"tool_use_id": "toolu_not_the_call"')
    assert text.count("_ask(") == 3 and "toolu_not_the_call" in text
    target.mkdir(parents=True)
    (target / "agent.py").write_text(text, encoding="utf-8")


@pytest.mark.bubblewrap
@pytest.mark.skipif(bubblewrap.check() is not None, reason="needs a bubblewrap box")
def test_a_loop_that_only_calls_the_judge_is_still_stopped_where_it_loops(tmp_path):
    """Only what a busy judge adds to each answer is left out of the code's time (hangs.CALL_CHARGE): a loop
    retrying the model without end is stopped at its retry line under grade, as its own pytest stops it."""
    subs = tmp_path / "subs"
    _retrying_forever(subs / "retry")
    report = tmp_path / "report.json"
    env = dict(os.environ, CRASHCOURSE_LOOP_TIMEOUT="1.5")
    done = subprocess.run([sys.executable, "-c", SLOW_JUDGE, "0.1", str(subs), "--level", "2", "--examples", "1",
                           "--output", str(report), "--fresh", "--no-progress"],
                          capture_output=True, text=True, cwd=KIT, timeout=900, env=env)
    assert report.exists(), done.stderr[-3000:]
    got = json.loads(report.read_text())["submissions"][0]
    first = next(t["output"] for t in got["tests"] if t["status"] != "passed")
    assert got["score"] == 0.0 and "_ask got stuck" in first and "in _ask" in first, first[:2000]
    own = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "exercises/level2",
                          "--submission", str(subs / "retry")], capture_output=True, text=True, cwd=KIT, timeout=600,
                         env=env)
    assert "0 of 10 points" in own.stdout and "in _ask" in own.stdout, own.stdout[-2000:]
