"""A loop that never ends is reported once, with the learner's file and line, and the level stops there.

Each case takes the level's solution, makes one of its functions spin forever, and runs it the way a
learner does: ``pytest exercises/levelN``, ``crashcourse check N``, and the crash matrix that ``check``
and ``watch`` draw, with a limit of a second or less so the kit's own suite stays quick. Only the
tests that call the stuck function stop early; the rest still run. The wall-clock budget (under
10 s with the default limit) is measured by ``benchmarks/latency.py`` and ``benchmarks/hang.py``, not
asserted here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import time

import pytest

from grader.engine import hangs
from grader.faces import matrix
from grader.levels import manifest

ROOT = Path(__file__).resolve().parents[1]

# level, the file, the function made to spin: every function the kit calls into, on some level
CASES = [(1, "checkpoint.py", "save_checkpoint"), (2, "agent.py", "save_checkpoint"),
         (3, "agent.py", "save_checkpoint"), (4, "resume.py", "resume_agent"), (6, "agent.py", "run_agent"),
         (6, "agent.py", "load_checkpoint")]


def spinning_copy(level: int, filename: str, function: str, target: Path) -> int:
    """Copy the level's solution into ``target`` with ``function`` spinning forever; the spin's line."""
    for path in (ROOT / "solutions" / f"level{level}").glob("*.py"):
        shutil.copy(path, target / path.name)
    source = (target / filename).read_text().splitlines()
    start = next(i for i, line in enumerate(source) if line.startswith(f"def {function}("))
    body = start + 1
    while not source[body].rstrip().endswith(("):", ":")) and source[body - 1].rstrip().endswith(","):
        body += 1  # a signature over several lines
    if source[body].strip().startswith(('"""', "'''")):
        quote = source[body].strip()[:3]
        if source[body].strip().count(quote) < 2:
            body += 1
            while quote not in source[body]:
                body += 1
        body += 1
    source[body:body] = ["    while True:", "        pass"]
    (target / filename).write_text("\n".join(source) + "\n")
    return body + 1  # the `while True:` line, counted from 1


@pytest.mark.parametrize("level, filename, function", CASES, ids=[f"level{c[0]}-{c[2]}" for c in CASES])
def test_a_hang_is_reported_once_with_its_place(tmp_path, level, filename, function):
    line = spinning_copy(level, filename, function, tmp_path)
    env = dict(os.environ, CRASHCOURSE_LOOP_TIMEOUT="1")
    run = subprocess.run([sys.executable, "-m", "pytest", f"exercises/level{level}", "--submission", str(tmp_path),
                          "-q", "-p", "no:cacheprovider"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=240)
    # The failures section only: the short summary at the end repeats each first line.
    out = run.stdout.split("short test summary info")[0]
    assert run.returncode == 1, run.stdout[-3000:]
    # The limit fired once in the whole run, and its message names the learner's own line.
    assert out.count("was still running after 1 s") == 1, out[-3000:]
    assert f"{filename}, line {line}, in {function}" in out, out[-3000:]
    assert "LoopTimeout" not in out and "grader/" not in out, out[-3000:]
    # It is called stuck, not a failure of the learner's code, and told with what to try.
    assert f"{function} got stuck" in out and "What to try:" in out, out[-3000:]
    assert "failed while it ran" not in out and "did not return" not in out, out[-3000:]
    # Every later test that calls the stuck code says at once that it did not run it again.
    failed = int(re.search(r"(\d+) failed", run.stdout).group(1))
    assert failed >= 2
    assert out.count("Not run: the code under test got stuck") == failed - 1, out[-3000:]
    if (level, function) == (1, "save_checkpoint"):
        # The three loader tests never call save_checkpoint: they run, and a correct loader passes them.
        assert "3 passed" in run.stdout and "5 of 13 points" in run.stdout, run.stdout[-3000:]
    if level == 4:
        # The hang came in the crash exploration: no file of the refusal test is blamed for it.
        assert "not refused cleanly" not in out and "there is no checkpoint.json" not in out, out[-3000:]


# -- the crash matrix that `check` and `watch` draw, in this process -------------------------------------

# level, the file, the function made to spin, and the matrix rows still checked (level 1 only)
MATRIX_CASES = [(1, "checkpoint.py", "save_checkpoint"), (1, "checkpoint.py", "load_checkpoint"),
                (2, "agent.py", "save_checkpoint"), (3, "agent.py", "run_agent"), (4, "resume.py", "resume_agent"),
                (5, "agent.py", "save_checkpoint"), (6, "agent.py", "load_checkpoint")]


@pytest.fixture
def short_limit(monkeypatch):
    """A limit of 0.3 s for calls into the learner's code, and no hang remembered from another test."""
    monkeypatch.setattr(hangs, "LOOP_TIMEOUT", 0.3)
    hangs.forget_hangs()
    yield
    hangs.forget_hangs()


@pytest.mark.parametrize("level, filename, function", MATRIX_CASES,
                         ids=[f"level{c[0]}-{c[2]}" for c in MATRIX_CASES])
def test_the_matrix_shows_a_hang_as_stuck_with_its_place(tmp_path, short_limit, level, filename, function):
    line = spinning_copy(level, filename, function, tmp_path)
    lv = manifest.load(ROOT).require(level)
    col = matrix.level_column("your code", tmp_path, lv)
    assert col.stuck is not None and col.failed
    assert col.stuck.place == f"{filename}, line {line}, in {function}"
    assert f"stuck in {function}" in col.summary()
    shown = matrix.render([col], width=100)
    # The story itself is told once, with the first failure: the matrix only names the function.
    assert "Where it was" not in shown and "What to try" not in shown, shown
    words = {word for cell in col.cells.values() for word in cell}
    if col.namespace == "loop":  # the loop invariants: crash states, none checked
        assert not words  # no crash state could be checked
    else:
        # A hang has its own word; it is never filed as the check's usual failure.
        assert "stuck" in words and words <= {"stuck", "ok"}, col.cells
        assert "stuck  the code did not return in time" in shown
    if level == 1:
        ok = {key[2] for key, cell in col.cells.items() if cell == ["ok"]}
        # Checks that never call the stuck function still run, and a correct file passes them.
        assert ok == ({"load-version", "load-shape", "load-accepts"} if function == "save_checkpoint" else {"fields"})


def test_a_fixed_file_is_run_again(tmp_path, short_limit):
    """`watch` draws the matrix again in the same process: once the file is fixed, nothing is refused."""
    spinning_copy(2, "agent.py", "save_checkpoint", tmp_path)
    lv = manifest.load(ROOT).require(2)
    assert matrix.level_column("your code", tmp_path, lv).stuck is not None
    shutil.copy(ROOT / "solutions" / "level2" / "agent.py", tmp_path / "agent.py")
    again = matrix.level_column("your code", tmp_path, lv)
    assert again.stuck is None and not again.failed, again.summary()


def test_catching_the_stop_does_not_keep_the_loop_going(tmp_path, short_limit):
    """A retry loop that catches Exception cannot swallow the stop and spin on."""
    (tmp_path / "retry.py").write_text(
        "import time\n\n"
        "def save_checkpoint(state, directory='checkpoints'):\n"
        "    while True:\n"
        "        try:\n"
        "            time.sleep(0.05)\n"
        "        except Exception:\n"
        "            continue\n")
    from grader.engine.loader import import_file

    module = import_file(tmp_path / "retry.py")
    started = time.monotonic()
    with pytest.raises(hangs.LoopTimeout) as stopped:
        with hangs.time_limit(0.3, owner=module.save_checkpoint):
            module.save_checkpoint({})
    assert time.monotonic() - started < 60  # a guard against a hung suite, not a speed check
    assert stopped.value.hang.place == "retry.py, line 6, in save_checkpoint"
    # Called again, the stuck function is refused before it runs.
    with pytest.raises(hangs.KnownHang, match="was not run again"):
        with hangs.time_limit(0.3, owner=module.save_checkpoint):
            module.save_checkpoint({})


def test_check_reports_a_hang_once_with_a_progress_line(tmp_path):
    line = spinning_copy(1, "checkpoint.py", "save_checkpoint", tmp_path)
    env = dict(os.environ, CRASHCOURSE_LOOP_TIMEOUT="1")
    run = subprocess.run([sys.executable, "-m", "grader", "check", "1", "--path", str(tmp_path)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=240)
    out = run.stdout
    assert run.returncode == 1, out[-3000:]
    # While the learner waits: one line saying the code is still running, before any verdict.
    assert out.index("save_checkpoint has been running for 0.5 s") < out.index("resume check"), out
    # The place, in full, once; the matrix calls the rows stuck; the loader's tests still pass.
    assert out.count("Where it was:") == 1 and f"checkpoint.py, line {line}, in save_checkpoint" in out, out
    assert "stuck in save_checkpoint" in out and "extra or missing keys" not in out, out
    assert "✓ task 3  load refuses versions it does not know" in out, out
    assert out.count("not run: it calls the stuck code") == 6, out


def test_pytest_prints_its_progress_line_once_when_code_hangs(tmp_path):
    """The note that code is still running goes on pytest's progress line, which then carries on: a
    line of its own made pytest print the test file's name a second time."""
    spinning_copy(1, "checkpoint.py", "save_checkpoint", tmp_path)
    env = dict(os.environ, CRASHCOURSE_LOOP_TIMEOUT="1", COLUMNS="200")
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "exercises/level1",
                          "--submission", str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=240)
    progress = run.stdout.split("= FAILURES =")[0]
    assert "save_checkpoint has been running for 0.5 s" in progress, run.stdout[-3000:]
    assert progress.count("exercises/level1/test_checkpoint.py") == 1, progress


def test_a_thread_of_the_learners_is_named_too(tmp_path, short_limit):
    """A loop waiting on its own worker thread: the story names the worker's line, as faulthandler would."""
    (tmp_path / "threaded.py").write_text(
        "import threading\n\n"
        "RELEASE = threading.Event()\n\n\n"
        "def work():\n"
        "    while not RELEASE.is_set():\n"
        "        pass\n\n\n"
        "def run_agent():\n"
        "    worker = threading.Thread(target=work)\n"
        "    worker.start()\n"
        "    worker.join()\n")
    from grader.engine.loader import import_file

    module = import_file(tmp_path / "threaded.py")
    try:
        with pytest.raises(hangs.LoopTimeout) as stopped:
            with hangs.time_limit(0.3, owner=module.run_agent):
                module.run_agent()
    finally:
        module.RELEASE.set()  # the worker ends with the test
    story = stopped.value.hang.story
    assert "Where it was: threaded.py, line 14, in run_agent" in story, story
    assert re.search(r"Another thread of yours was at: threaded.py, line [78], in work", story), story


def test_a_loop_that_runs_long_but_finishes_keeps_its_points_under_check(tmp_path):
    """Code that runs past the still-running notice but finishes in time is judged as pytest judges it.

    The notice is said from inside the learner's call, while their loop may be recorded: ``check``
    once wrote it through the recorder, which took it for the learner's write to a descriptor they
    never opened and refused the whole run as unseen (level 6's long run lost task 3 whenever it
    passed 2 s on a busy machine). Here level 2's solution pauses once, between opening its temp file
    and writing it, past the notice (half the limit) and well before the stop."""
    for path in (ROOT / "solutions" / "level2").glob("*.py"):
        shutil.copy(path, tmp_path / path.name)
    agent = tmp_path / "agent.py"
    source = agent.read_text()
    pause = ('    with open(tmp, "w", encoding="utf-8") as f:\n'
             '        if not sys.__dict__.get("_paused"):  # once per process\n'
             '            sys.__dict__["_paused"] = True\n'
             '            time.sleep(1.5)\n')
    assert source.count('    with open(tmp, "w", encoding="utf-8") as f:\n') == 1
    agent.write_text("import sys\nimport time\n" + source.replace('    with open(tmp, "w", encoding="utf-8") as f:\n',
                                                                  pause))
    env = dict(os.environ, CRASHCOURSE_LOOP_TIMEOUT="2.5")
    checked = subprocess.run([sys.executable, "-m", "grader", "check", "2", "--path", str(tmp_path)], cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=240)
    assert "has been running for 1.25 s" in checked.stdout, checked.stdout[-3000:]
    tested = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "exercises/level2",
                             "--submission", str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=240)
    score = re.search(r"crashcourse: ([\d.]+) of ([\d.]+) points", tested.stdout)
    assert score and score.group(1) == score.group(2), tested.stdout[-3000:]
    assert "could not see everything" not in checked.stdout, checked.stdout[-3000:]
    assert f"{score.group(1)} of {score.group(2)} points" in checked.stdout, checked.stdout[-3000:]


class _InTheBox:
    """What a stand-in for code running in the grading box looks like to a time limit (grader.grading.stand_in)."""

    __name__ = "run_agent"

    def in_a_fresh_process(self):
        return self


def test_a_limit_on_code_in_the_box_waits_once_more_for_the_box_before_it_tells_a_story():
    """Under grade the judge only waits while the box runs the code, and the box stops the code a little
    before the judge's limit and says where it was. A busy machine (the judge reading a long kernel
    trace) can make that answer late: the judge then waits as long again, rather than stop with a story
    from its own frames (once told as "Importing crashcourse got stuck", the command's own line). It tells
    its own only when the box has gone silent for a whole limit."""
    owner = _InTheBox()
    with hangs.time_limit(0.3, owner=owner):
        time.sleep(0.45)  # past the limit, within the wait: the box's answer came in time after all
    with hangs.time_limit(0.4, owner=owner):
        for _ in range(7):  # 0.7 s, while the box keeps talking: it is not silent, its own limit rules
            time.sleep(0.1)
            hangs.heard_from_the_box()
    started = time.monotonic()
    with pytest.raises(hangs.LoopTimeout):  # ... but only a few times over: code that catches every stop
        with hangs.time_limit(0.4, owner=owner):
            for _ in range(50):
                time.sleep(0.1)
                hangs.heard_from_the_box()
    assert time.monotonic() - started < 0.4 * (hangs.BACKSTOP_WAITS + 1) + 0.5
    started = time.monotonic()
    with pytest.raises(hangs.LoopTimeout) as stopped:
        with hangs.time_limit(0.3, owner=owner):
            time.sleep(5)
    assert 0.55 < time.monotonic() - started < 2
    assert "crashcourse" not in str(stopped.value) and "Where it was" not in str(stopped.value), str(stopped.value)


def test_a_commands_own_script_is_never_the_learners_frame():
    """The `crashcourse` and `pytest` commands' scripts sit in the interpreter's scripts folder: the bottom
    frame of every stack in a process they started, never the learner's code."""
    import sysconfig
    script = os.path.join(sysconfig.get_paths()["scripts"], "crashcourse")
    assert not hangs._is_learners(script, "")
    assert hangs._is_learners(str(ROOT / "tests" / "corpus" / "level2" / "w04_replace_inside_with.py"), "")


def test_a_paused_limit_does_not_count_the_graders_own_work():
    """Starting a grading box is the grader's time: a limit running around it stops its clock meanwhile."""
    with hangs.time_limit(0.4, owner=_InTheBox().in_a_fresh_process):
        with hangs.paused():
            time.sleep(0.6)
            assert hangs.remaining() > 0.3
        time.sleep(0.2)  # still within the 0.4 s the code itself has
        assert 0 < hangs.remaining() < 0.25
