"""The recorder sees every ordinary way to write a file, at the moment bytes reach the OS.

Each check in ``recorder_check.py`` runs here under pytest's interpreter, one test per check; the
same script then runs whole under every other Python the kit supports, because the traps differ by
version (3.10's pathlib binds ``io.open`` and ``os.replace`` at import).
"""

import os
import subprocess
import sys

import pytest

import recorder_check

HERE = os.path.dirname(os.path.abspath(__file__))
OTHER_PYTHONS = ["/root/.pyenv/versions/3.10.13/bin/python", "/root/.pyenv/versions/3.12.1/bin/python",
                 "/root/.pyenv/versions/3.13.0/bin/python"]


@pytest.mark.parametrize("check", recorder_check.CHECKS, ids=[fn.__name__ for fn in recorder_check.CHECKS])
def test_recorder(check, tmp_path):
    check(os.path.realpath(tmp_path))


@pytest.mark.parametrize("python", OTHER_PYTHONS, ids=lambda p: "python" + p.split("/")[-3].rsplit(".", 1)[0])
def test_recorder_under_other_pythons(python):
    if not os.path.exists(python):
        pytest.skip(f"{python} is not installed on this machine")
    done = subprocess.run([python, os.path.join(HERE, "recorder_check.py")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, f"{python}:\n{done.stdout}{done.stderr}"
    assert f"all {len(recorder_check.CHECKS)} checks passed" in done.stdout, done.stdout


def test_the_checks_import_only_the_standard_library():
    """recorder_check must run where pytest and Hypothesis are absent: it and what it imports stay stdlib."""
    code = ("import sys; sys.modules['pytest'] = None; sys.modules['hypothesis'] = None; "
            f"sys.path.insert(0, {HERE!r}); import recorder_check; "
            "bad = [m for m in ('pytest', 'hypothesis', 'grader.engine.explore', 'grader.engine.scripted') "
            "if sys.modules.get(m) is not None]; print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def _program_started_during_recording(tmp_path, in_grader_work: bool) -> list:
    """A thread of the grader starts a program while the main thread records; what does the recorder blame?"""
    import subprocess
    import threading

    from grader.engine.recorder import Recorder, grader_work

    recording, finished = threading.Event(), threading.Event()

    def grader_thread():
        recording.wait(30)
        if in_grader_work:
            with grader_work():
                subprocess.run([sys.executable, "-c", "pass"])
        else:
            subprocess.run([sys.executable, "-c", "pass"])
        finished.set()

    thread = threading.Thread(target=grader_thread)
    thread.start()
    with Recorder(watch=[str(tmp_path)]) as rec:
        recording.set()
        finished.wait(30)
    thread.join()
    return rec.unseen


def test_a_program_the_grader_starts_in_another_thread_is_not_blamed_on_the_recorded_code(tmp_path):
    """crashcourse check runs the tests in a thread while it records the loop (a race CI once lost)."""
    assert any("started another program" in u for u in _program_started_during_recording(tmp_path, False)), \
        "without grader_work the audit hook blames whatever starts a program"
    assert _program_started_during_recording(tmp_path, True) == []


@pytest.mark.skipif(not os.access("/dev/shm", os.W_OK), reason="no /dev/shm here")
def test_a_loop_whose_temp_folder_is_in_dev_shm_is_recorded(tmp_path):
    """TMPDIR=/dev/shm (a folder in memory) must not look like a device whose writes are left out."""
    import tempfile

    from grader.engine.explore import explore_loop
    from grader.engine.scripted import support_tickets

    from grader.engine.loader import import_file

    module = import_file(os.path.join(HERE, "..", "solutions", "level2", "agent.py"), "shm_solution")
    with tempfile.TemporaryDirectory(dir="/dev/shm") as work:
        found = explore_loop(module.run_agent, support_tickets(1), models=("M1",), workdir=work)
    assert found.ok and found.error is None and any(op.kind == "rename" for op in found.ops), found.report()


def test_fsync_held_in_a_partial_is_named_and_pytest_mark_is_left_alone(tmp_path):
    """A module that binds os.fsync into functools.partial at import keeps the real function where no
    swap reaches: the recorder says so. A name that answers any attribute (pytest.mark) is not one."""
    import functools
    import warnings

    from grader.engine import recorder

    namespace = {"__name__": "student", "sync": functools.partial(os.fsync), "mark": pytest.mark}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with recorder.Recorder(watch=[str(tmp_path)], namespaces=[namespace]) as rec:
            pass
    assert any("functools.partial" in u and "os.fsync" in u for u in rec.unseen), rec.unseen


@pytest.mark.skipif(not hasattr(os, "pwritev"), reason="no os.pwritev here")
def test_pwritev_is_recorded_and_its_dsync_flag_makes_the_write_durable(tmp_path):
    """os.pwritev used to go around the recorder (the replay then disagreed with the disk, and correct
    code failed); with RWF_DSYNC one write is durable on return, as under O_SYNC."""
    from grader.engine.crash_models import crash_states
    from grader.engine.recorder import Recorder

    with Recorder(watch=[str(tmp_path)]) as rec:
        fd = os.open(tmp_path / "checkpoint.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.pwritev(fd, [b'{"a"', b": 1}"], 0, getattr(os, "RWF_DSYNC", 0))
        os.close(fd)
    assert rec.unseen == []
    write = next(op for op in rec.ops if op.kind == "write")
    assert (write.api, write.data, write.offset) == ("os.pwritev", b'{"a": 1}', 0)
    if hasattr(os, "RWF_DSYNC"):
        assert "sync" in write.flags
        after = [s.files.get("checkpoint.json") for s in crash_states(rec.ops, {}, str(tmp_path), models=("M3",))
                 if s.point > write.index]
        assert after and set(after) == {b'{"a": 1}'}, "a power cut after the write keeps it"
