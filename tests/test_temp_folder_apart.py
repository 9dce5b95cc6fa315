"""The system temp folder is a file system apart from the folder learner code runs in, in every face.

On most machines ``/tmp`` (what ``tempfile`` uses without ``dir=``) is a file system of its own, so a
temp file made there cannot be renamed into the checkpoint folder: the kernel refuses with EXDEV, and
``shutil.move`` copies instead. The grader's box gives its ``/tmp`` (the code's ``TMPDIR``) a tmpfs of
its own; in-process the kit refuses such a rename itself (``grader.engine.recorder``), so ``pytest``
and ``crashcourse grade`` meet the same thing. Issue 26: a temp file in the system temp folder used to
be judged as a rename on one file system.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from grader.engine import recorder as recorder_module
from grader.engine.explore import working_in
from grader.engine.loader import import_file
from grader.engine.recorder import Recorder
from grader.grading import bubblewrap, stand_in
from grader.grading.box import Box


@pytest.fixture
def folder():
    """A run folder inside the system temp folder, as the levels make them (so 'inside' must win)."""
    with tempfile.TemporaryDirectory(prefix="crashcourse-apart-") as work:
        yield os.path.realpath(work)


def _temp_file(data: bytes = b"{}") -> str:
    fd, tmp = tempfile.mkstemp(suffix=".json")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return tmp


def test_a_rename_from_the_temp_folder_into_the_run_folder_fails_with_the_kernels_error(folder):
    tmp = _temp_file()
    target = os.path.join(folder, "checkpoint.json")
    try:
        with working_in(folder):
            for move in (os.replace, os.rename, os.link, lambda a, b: Path(a).replace(b)):
                with pytest.raises(OSError) as caught:
                    move(tmp, "checkpoint.json")
                assert caught.value.errno == errno.EXDEV
                assert str(caught.value) == f"[Errno {errno.EXDEV}] {os.strerror(errno.EXDEV)}: {tmp!r} -> 'checkpoint.json'" \
                    or isinstance(caught.value.filename, Path)
            # The other way (the old checkpoint moved out to /tmp) crosses the same boundary.
            with open("checkpoint.json", "w") as f:
                f.write("{}")
            with pytest.raises(OSError) as caught:
                os.replace("checkpoint.json", tmp + ".old")
            assert caught.value.errno == errno.EXDEV
            # Within the run folder, and within the temp folder, a rename is a rename.
            os.replace("checkpoint.json", "renamed.json")
            os.replace(tmp, tmp + ".moved")
            os.replace(tmp + ".moved", tmp)
            # A source that is not there is the kernel's ENOENT, as a real rename says first.
            with pytest.raises(FileNotFoundError):
                os.replace(tmp + ".missing", "checkpoint.json")
        # Outside the guard, nothing is refused (and os is the real os again).
        assert os.replace is recorder_module._real["os.replace"]
        os.replace(tmp, target)
        assert Path(target).read_bytes() == b"{}"
    finally:
        for path in (tmp, tmp + ".old"):
            if os.path.exists(path):
                os.unlink(path)


def test_a_name_bound_at_import_is_guarded_too(folder, tmp_path):
    """`from os import replace` in a learner's file (level 1 runs its save with no recorder)."""
    source = tmp_path / "saver.py"
    source.write_text("from os import replace\n\n\ndef save(tmp):\n    replace(tmp, 'checkpoint.json')\n")
    saver = import_file(source, "apart")
    real = saver.replace
    tmp = _temp_file()
    try:
        with working_in(folder):
            with pytest.raises(OSError) as caught:
                saver.save(tmp)
        assert caught.value.errno == errno.EXDEV
        assert saver.replace is real  # given back once the code is no longer running in the folder
    finally:
        os.unlink(tmp)


def test_shutil_move_from_the_temp_folder_is_recorded_as_the_copy_it_is(folder):
    tmp = _temp_file(b'{"turns": 1}')
    target = os.path.join(folder, "checkpoint.json")
    with working_in(folder), Recorder(watch=[folder]) as rec:
        shutil.move(tmp, "checkpoint.json")
    kinds = [(op.kind, op.path) for op in rec.ops if op.kind in ("open", "write", "rename", "unlink")]
    assert ("open", target) in kinds and ("unlink", tmp) in kinds
    assert not any(kind == "rename" for kind, _ in kinds), kinds
    written = b"".join(op.data for op in rec.ops if op.kind == "write" and op.path == target)
    assert written == b'{"turns": 1}' and not os.path.exists(tmp) and not rec.unseen


def test_a_recorder_alone_refuses_it_too(folder):
    """A recorder watching the run folder (the grading worker's, with no working_in around it)."""
    tmp = _temp_file()
    try:
        with Recorder(watch=[folder]) as rec:
            with pytest.raises(OSError) as caught:
                os.replace(tmp, os.path.join(folder, "checkpoint.json"))
        assert caught.value.errno == errno.EXDEV
        assert not [op for op in rec.ops if op.kind == "rename"]
    finally:
        os.unlink(tmp)


def test_the_judge_does_not_take_the_guard_for_a_test_patching_os(folder):
    """In the judge the guard wraps os while a stand-in call runs; that is no test's patch."""
    stand_in.remember_pristine()
    with working_in(folder):
        assert stand_in.patched_by_test() == []


AGENT = '''
import os, tempfile


def where():
    temp = tempfile.gettempdir()
    return temp, os.stat(temp).st_dev != os.stat(".").st_dev


def here():
    return os.getcwd()


def move_in():
    fd, tmp = tempfile.mkstemp()
    os.close(fd)
    os.replace(tmp, "moved.json")
'''


@pytest.mark.parametrize("boxed", [False, pytest.param(True, marks=pytest.mark.bubblewrap)],
                         ids=["bare sandbox", "bubblewrap box"])
def test_the_grading_worker_refuses_the_rename_too(tmp_path, boxed):
    """Without a box the worker's temp folder is in the submission's own root, on its file system:
    the worker refuses the rename itself, as the box's kernel does."""
    if boxed and bubblewrap.check() is not None:
        pytest.skip(f"no bubblewrap box here: {bubblewrap.check()}")
    root = tmp_path / "box"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "agent.py").write_text(AGENT)
    box = Box(str(root / "sub"), str(root), f"apart-move-{os.getpid()}-{boxed}", 30.0, boxed=boxed)
    try:
        move_in = stand_in.RemoteSubmission(Path(box.folder), box).function("agent.py", "move_in")
        with pytest.raises(OSError) as caught:
            move_in()
    finally:
        box.shutdown()
    assert "Invalid cross-device link" in str(caught.value)
    assert not (root / "sub" / "moved.json").exists()


@pytest.mark.parametrize("boxed", [False, pytest.param(True, marks=pytest.mark.bubblewrap)],
                         ids=["bare sandbox", "bubblewrap box"])
def test_a_call_runs_even_when_the_judges_folder_is_gone(tmp_path, boxed):
    """A check that ran in a temp folder of its own and removed it leaves the judge in a folder that is
    gone: the next call runs in the submission's folder (os.getcwd() there once raised in the judge)."""
    if boxed and bubblewrap.check() is not None:
        pytest.skip(f"no bubblewrap box here: {bubblewrap.check()}")
    root = tmp_path / "box"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "agent.py").write_text(AGENT)
    gone = root / "gone"
    gone.mkdir()
    box = Box(str(root / "sub"), str(root), f"apart-gone-{os.getpid()}-{boxed}", 30.0, boxed=boxed)
    here = os.getcwd()
    try:
        remote = stand_in.RemoteSubmission(Path(box.folder), box).function("agent.py", "here")
        os.chdir(gone)
        gone.rmdir()
        assert remote() == box.folder
        assert box.incidents == {}
    finally:
        os.chdir(here)
        box.shutdown()


@pytest.mark.bubblewrap
@pytest.mark.skipif(bubblewrap.check() is not None, reason=f"no bubblewrap box here: {bubblewrap.check()}")
def test_in_the_box_the_temp_folder_is_a_file_system_of_its_own(tmp_path):
    root = tmp_path / "box"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "agent.py").write_text(AGENT)
    box = Box(str(root / "sub"), str(root), f"apart-test-{os.getpid()}", 30.0, boxed=True)
    try:
        where = stand_in.RemoteSubmission(Path(box.folder), box).function("agent.py", "where")
        temp, apart = where()
    finally:
        box.shutdown()
    assert temp == "/tmp" and apart
