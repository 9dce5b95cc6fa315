"""Only the files survive a crash: every resume or load of a crash state runs in a process that never
saw the run (grader.engine.fresh), in pytest as under ``crashcourse grade``.

The corpus cases that keep their state in memory (tests/corpus/level4/wrong_reruns_hidden_*,
tests/corpus/level6/wrong/ticket_on_disk_*, tests/corpus/level1/w13_*) are graded in-process by
test_level1/4/6; here the mechanism itself, and the same cases through ``crashcourse grade``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from grader.engine import fresh, hangs
from grader.engine.loader import import_file

KIT = Path(__file__).resolve().parent.parent


def _call(fn, *args):
    return fn(*args)


def _stuck(fn, *args):
    try:
        with hangs.time_limit(0.5, owner=fn):
            fn(*args)
    except hangs.LoopTimeout as exc:
        return "stopped: " + exc.where
    return "returned"


@pytest.fixture
def learner(tmp_path):
    path = tmp_path / "learner.py"
    path.write_text(textwrap.dedent("""\
        import os
        import sys

        counter = 0

        def remember():
            global counter
            counter += 1
            sys.__dict__["_remembered"] = sys.__dict__.get("_remembered", 0) + 1
            os.environ["REMEMBERED"] = str(sys.__dict__["_remembered"])
            return counter, sys.__dict__["_remembered"], os.environ["REMEMBERED"]

        def open_a_pipe():
            r, w = os.pipe()
            os.write(w, b"kept")
            return r

        def inode(fd):
            try:
                return os.fstat(fd).st_ino
            except OSError:
                return None

        def spin():
            while True:
                pass

        def meet(mine, other, seconds):
            # Leaves a mark, then waits for the other job's: True if they ran at the same time.
            import time
            open(mine, "w").close()
            ends = time.monotonic() + seconds
            while time.monotonic() < ends:
                if os.path.exists(other):
                    return counter, True
                time.sleep(0.01)
            return counter, False

        def leave(code):
            os._exit(code)
        """), encoding="utf-8")
    return import_file(path, "fresh")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform: jobs run in-process")
def test_nothing_in_memory_reaches_a_fresh_process(learner):
    # In this process the memory builds up, in the module, in sys and in the environment...
    assert learner.remember() == (1, 1, "1")
    assert learner.remember() == (2, 2, "2")
    # ...and each fresh process starts from none of it, not even the last fresh process's.
    assert fresh.run_fresh(_call, learner.remember) == (1, 1, "1")
    assert fresh.run_fresh(_call, learner.remember) == (1, 1, "1")
    # A descriptor opened here is not open there.
    fd = learner.open_a_pipe()
    try:
        assert learner.inode(fd) is not None
        assert fresh.run_fresh(_call, learner.inode, fd) != learner.inode(fd)
    finally:
        os.close(fd)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform: jobs run in-process")
def test_a_box_swept_in_this_process_leaves_the_fork_server(learner):
    # A box graded in-process (an instructor's scenarios, the kit's own tests) sweeps every child of
    # this process when it shuts down; the fork server is the kit's, and later fresh jobs need it.
    from grader.grading import sandbox
    assert fresh.server_pids()
    sandbox.kill_tree("no-such-box", root_pid=os.getpid())
    assert fresh.run_fresh(_call, learner.remember) == (1, 1, "1")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform: jobs run in-process")
def test_a_spare_child_killed_from_outside_is_replaced(learner):
    # The server forks its next child ahead of the next job; one killed while it waits (by a sweep that
    # looked before it was forked, or by the machine) must not take a job and fail it.
    import signal
    from grader.grading import sandbox
    assert fresh.run_fresh(_call, learner.remember) == (1, 1, "1")
    # Each server forks its next child once it has answered; on a busy machine that takes a while.
    spares = _until(lambda: [p for server in fresh.server_pids() for p in sandbox.descendants(server)
                             if _state(p) == "S"])
    assert spares, "the server forked no child to wait for the next job"
    for pid in [p for server in fresh.server_pids() for p in sandbox.descendants(server)]:  # the child that answered too
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # the child that answered, gone between the listing and the kill
    # Dead, not merely signalled, before the job is sent: this test is about a spare that died waiting.
    assert _until(lambda: all(_state(p) in ("Z", None) for p in spares))
    assert fresh.run_fresh(_call, learner.remember) == (1, 1, "1")


def _state(pid: int):
    """A process's state letter from /proc (S: asleep, waiting for its job; Z: dead, not reaped), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return None


def _until(condition, seconds: float = 30.0):
    """``condition()`` once it is true (polled), or its last value after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.01)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform: jobs run in-process")
def test_a_hang_in_a_fresh_process_is_known_here(learner):
    mark = hangs.hang_mark()
    assert fresh.run_fresh(_stuck, learner.spin).startswith("stopped: learner.py, line")
    stopped = hangs.hangs_since(mark)
    assert [kind for kind, _ in stopped] == ["stopped"] and stopped[0][1].function == "spin"
    # A later fresh process is told too: the stuck function is refused at once.
    assert "was not run again" in fresh.run_fresh(_stuck, learner.spin) or hangs.hangs_since(mark)[-1][0] == "refused"
    hangs.forget_hangs()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform: jobs run in-process")
def test_jobs_run_side_by_side_and_answer_in_order(learner, tmp_path):
    learner.remember()  # memory here (counter 1) reaches none of them
    marks = [str(tmp_path / f"mark{i}") for i in range(4)]
    together = len(fresh.server_pids()) > 1  # one server per core: with two, two jobs sent together meet
    wait = 30 if together else 0
    calls = [fresh.Call(_call, learner.meet, (marks[i], marks[i ^ 1], wait)) for i in range(4)]
    answers = list(fresh.run_fresh_each(calls))
    assert [died for _, died in answers] == [None] * 4
    assert [value for value, _ in answers] == [(0, together)] * 4


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform: jobs run in-process")
def test_a_job_that_dies_is_told_in_its_place_and_stopping_early_loses_nothing(learner):
    calls = [fresh.Call(_call, learner.remember), fresh.Call(_call, learner.leave, (3,)),
             fresh.Call(_call, learner.remember), fresh.Call(_call, learner.spin)]
    answers = fresh.run_fresh_each(calls, ahead=3)
    assert next(answers) == ((1, 1, "1"), None)
    value, died = next(answers)
    assert value is None and "exited (status 3)" in str(died)
    answers.close()  # the rest were sent: they are stopped, and their answers skipped
    assert fresh.run_fresh(_call, learner.remember) == (1, 1, "1")
    assert fresh.run_fresh(_call, learner.remember) == (1, 1, "1")
    # The job left spinning was stopped: each server keeps only its spare child.
    from grader.grading import sandbox

    def children() -> list:
        return [[(p, _state(p)) for p in sandbox.descendants(server)] for server in fresh.server_pids()]
    def settled():
        # A server forks its next spare once it has answered, and the child that answered takes a
        # moment to exit: for a while a server has one child that is not its spare, or two. Settled
        # is the same single child per server on two looks a tenth of a second apart.
        first = children()
        time.sleep(0.1)
        return first if first == children() and all(len(k) == 1 for k in first) else None
    kept = _until(settled) or children()
    assert [len(k) for k in kept] == [1] * len(fresh.server_pids()), kept


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform: jobs run in-process")
def test_a_job_killed_by_its_own_code_is_not_told_as_one_that_ran_out_of_time(tmp_path):
    # Only the server's own stop is a job past its time; a SIGKILL from anywhere else is told as a signal.
    path = tmp_path / "kills_itself.py"
    path.write_text("import os\nimport signal\n\ndef die():\n    os.kill(os.getpid(), signal.SIGKILL)\n")
    module = import_file(path)
    with pytest.raises(fresh.FreshProcessDied) as died:
        fresh.run_fresh(_call, module.die, timeout=20)
    assert "ended by signal SIGKILL" in str(died.value) and "still running" not in str(died.value)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform: jobs run in-process")
def test_a_fresh_process_runs_the_file_as_it_is_now(tmp_path):
    # The file is compiled once for every child; an edit (a learner saving under `watch`) is seen.
    path = tmp_path / "edited.py"
    path.write_text("def version():\n    return 1\n", encoding="utf-8")
    module = import_file(path, "fresh")
    assert fresh.run_fresh(_call, module.version) == 1
    assert fresh.run_fresh(_call, module.version) == 1
    path.write_text("def version():\n    return 'two'\n", encoding="utf-8")
    assert fresh.run_fresh(_call, module.version) == "two"
    path.write_text("def version(:\n", encoding="utf-8")  # one it cannot compile: the child meets the error
    with pytest.raises(fresh.FreshProcessDied, match="SyntaxError"):
        fresh.run_fresh(_call, module.version)


def test_a_kit_function_is_not_a_learners():
    assert fresh.origin(_call) is None
    assert fresh.run_fresh(_call, os.getpid) == os.getpid()  # nothing to start afresh: run here


def _grade(tmp_path, level: int, files: dict) -> dict:
    subs = tmp_path / "subs"
    for name, (source, target) in files.items():
        (subs / name).mkdir(parents=True)
        shutil.copy(source, subs / name / target)
    report = tmp_path / "report.json"
    from grader.grading import bubblewrap
    subprocess.run([sys.executable, "-m", "grader", "grade", str(subs), "--level", str(level), "--examples", "2",
                    "--output", str(report)] + ([] if bubblewrap.check() is None else ["--no-box"]),
                   capture_output=True, text=True, cwd=KIT, timeout=600, check=True)
    data = json.loads(report.read_text())
    entries = data if isinstance(data, list) else data.get("submissions") or data.get("results")
    return {e.get("id") or e.get("name"): {t["name"] for t in e.get("tests", []) if t.get("status") == "failed"}
            for e in entries}


def test_memory_hides_nothing_under_grade_either(tmp_path):
    """The same cases, graded in the sandbox: each resume runs in a fresh child of the worker's fork server."""
    corpus = KIT / "tests" / "corpus" / "level4"
    failed = _grade(tmp_path / "4", 4, {
        "memory": (corpus / "wrong_reruns_hidden_by_memory" / "resume.py", "resume.py"),
        "environ": (corpus / "wrong_reruns_hidden_in_environ" / "resume.py", "resume.py"),
        "solution": (KIT / "solutions" / "level4" / "resume.py", "resume.py")})
    assert failed["memory"] == failed["environ"] == {"test_the_pending_call_is_answered_once"}
    assert failed["solution"] == set()
    corpus = KIT / "tests" / "corpus" / "level6" / "wrong"
    failed = _grade(tmp_path / "6", 6, {"sys": (corpus / "ticket_on_disk_state_in_sys.py", "agent.py"),
                                        "solution": (KIT / "solutions" / "level6" / "agent.py", "agent.py")})
    assert "test_every_crash_state_loads_as_one_whole_save" in failed["sys"]
    assert failed["solution"] == set()


def test_level_one_loads_run_afresh_under_grade_as_under_pytest(tmp_path):
    """Level 1's loader checks run each load in a process that never saved, in the box as in pytest:
    w13 (tokensUsed kept in ``sys``) fails exactly what its VERDICT says, and a refusal comes back
    whole (the solution's UnsupportedVersion is still UnsupportedVersion). Each load runs in a temp
    folder that is gone by the next one: the worker once died on the next fresh call, from there."""
    corpus = KIT / "tests" / "corpus" / "level1"
    failed = _grade(tmp_path / "1", 1, {
        "w13": (corpus / "w13_tokens_kept_in_memory.py", "checkpoint.py"),
        "solution": (KIT / "solutions" / "level1" / "checkpoint.py", "checkpoint.py")})
    assert failed["w13"] == {"test_the_file_holds_exactly_the_six_fields",
                             "test_without_tokens_used_the_spend_budget_trips_late"}
    assert failed["solution"] == set()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform: jobs run in-process")
def test_a_job_starts_even_when_the_callers_folder_is_gone(learner, tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    here = os.getcwd()
    os.chdir(gone)
    try:
        gone.rmdir()
        assert fresh.run_fresh(_call, learner.remember) == (1, 1, "1")
    finally:
        os.chdir(here)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform: watch checks in its own process")
def test_watch_checks_in_a_child_and_keeps_nothing_of_the_learners(tmp_path):
    """Each of watch's checks is a child of the warm process: the learner's module, and whatever it put
    in memory, never reach the process that forks the next check."""
    from grader.faces.student import watch
    from grader.levels import manifest
    from grader.engine import loader

    level = manifest.load(KIT).require(2)
    mine = tmp_path / "mine"
    mine.mkdir()
    source = (KIT / "solutions" / "level2" / "agent.py").read_text(encoding="utf-8")
    (mine / "agent.py").write_text("import sys\nsys.__dict__['_checked_here'] = True\n" + source, encoding="utf-8")
    made = set(loader.MADE)
    watch.warm_up(level, mine)
    assert watch.check_in_a_child(level, mine, examples=2) is True
    assert "_checked_here" not in sys.__dict__ and loader.MADE == made
    (mine / "agent.py").write_text(source.replace("os.replace(tmp, path)", "os.rename(tmp, path + '.x')"),
                                   encoding="utf-8")
    assert watch.check_in_a_child(level, mine, examples=2) is False


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform: jobs run in-process")
def test_a_function_bound_as_a_partial_runs_afresh_too(tmp_path):
    # `resume_agent = functools.partial(_resume, ...)` at module level: the fresh child finds the
    # partial under its module name, so what the first call kept in memory is gone for the second.
    path = tmp_path / "partial_learner.py"
    path.write_text(textwrap.dedent("""\
        import functools
        import sys

        def _count(step):
            sys.__dict__["_partial_calls"] = sys.__dict__.get("_partial_calls", 0) + step
            return sys.__dict__["_partial_calls"]

        count = functools.partial(_count, 1)
        """))
    module = import_file(path)
    assert fresh.origin(module.count) == (str(path), "count")
    assert module.count() == 1 and module.count() == 2  # in this process, memory carries over
    assert fresh.run_fresh(_call, module.count) == 1
    assert fresh.run_fresh(_call, module.count) == 1
    sys.__dict__.pop("_partial_calls", None)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform: jobs run in-process")
def test_a_process_left_running_by_the_job_does_not_hold_its_answer(tmp_path):
    # A daemon forked by the learner's code holds every pipe its parent had, the answer's too: the
    # answer is sized, so the job's end is known without waiting for the daemon's.
    path = tmp_path / "daemon_learner.py"
    path.write_text(textwrap.dedent(f"""\
        import os
        import time

        def leave_a_daemon():
            pid = os.fork()
            if pid == 0:
                with open({str(tmp_path / "daemon.pid")!r}, "w") as f:
                    f.write(str(os.getpid()))
                time.sleep(30)
                os._exit(0)
            return 7
        """))
    module = import_file(path)
    started = time.monotonic()
    try:
        assert fresh.run_fresh(_call, module.leave_a_daemon) == 7
        assert time.monotonic() - started < 20, "waited for the daemon"
    finally:
        for _ in range(100):
            if (tmp_path / "daemon.pid").exists() and (tmp_path / "daemon.pid").read_text():
                os.kill(int((tmp_path / "daemon.pid").read_text()), 9)
                break
            time.sleep(0.05)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform: jobs run in-process")
def test_watch_forks_crash_states_from_servers_started_before_pytest(tmp_path):
    """`watch` starts the fork servers before it imports pytest and Hypothesis to collect the tests, with
    the level's module loaded: each of the hundreds of children a check of level 6 forks copies a process
    of some 24 MB instead of 40, and finds what it runs already there."""
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(KIT / "tests")!r})
        from grader.engine import fresh, loader
        from grader.faces.student import watch
        from grader.levels import manifest
        level = manifest.load({str(KIT)!r}).require(6)
        watch.start_fresh_servers(level)
        servers = len(fresh.server_pids())
        import pytest, hypothesis  # as warm_up does, after the servers
        import fresh_probe
        module = loader.import_file({str(KIT / "solutions" / "level6" / "agent.py")!r})
        seen = fresh.run_fresh(fresh_probe.loaded, module.load_checkpoint, "pytest", "hypothesis",
                               "grader.levels.journal", "json")
        print(json.dumps([servers, seen]))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    servers, seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert servers >= 1
    assert seen == {"pytest": False, "hypothesis": False, "grader.levels.journal": True, "json": True}


def test_a_module_beside_the_learners_file_wins_over_one_of_the_same_name_earlier_on_the_path(tmp_path, monkeypatch):
    # `python agent.py` puts the file's folder first; so does import_file, even when that folder is
    # already on the path behind another one holding a module of the same name.
    other, mine = tmp_path / "other", tmp_path / "mine"
    other.mkdir()
    mine.mkdir()
    (other / "ckpt_helpers_x.py").write_text("WHO = 'another folder'\n")
    (mine / "ckpt_helpers_x.py").write_text("WHO = 'beside agent.py'\n")
    (mine / "agent.py").write_text("from ckpt_helpers_x import WHO\n")
    monkeypatch.setattr(sys, "path", [str(other), str(mine)] + sys.path)
    monkeypatch.delitem(sys.modules, "ckpt_helpers_x", raising=False)
    try:
        assert import_file(mine / "agent.py").WHO == "beside agent.py"
        assert sys.path[0] == str(mine) and sys.path.count(str(mine)) == 1
    finally:
        sys.modules.pop("ckpt_helpers_x", None)
