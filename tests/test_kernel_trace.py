"""The kernel's account of a worker's file operations (grader.grading.kernel_trace).

Lines in strace's own format (``-f -y -x``; a string holding bytes other than printable ASCII is
all ``\\xHH``) are read into operations; two accounts of one run are
compared, and the first difference is worded for the learner; a real strace run of a small child
agrees with what the child did, and is read only up to the bytes it sent on the judge's pipe.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from grader.engine.crash_models import FileSystem, crash_states
from grader.engine.ops import Op
from grader.grading import kernel_trace, wire
from grader.grading.kernel_trace import MISMATCH, KernelTrace, reconcile


def final_listing(ops: list, initial: dict, folder: str) -> dict:
    """The folder after every operation: what an uncrashed run leaves."""
    fs = FileSystem(initial)
    for op in ops:
        fs.apply(op)
    return fs.listing(folder)


def hx(text) -> str:
    data = text.encode() if isinstance(text, str) else text
    return "".join(f"\\x{b:02x}" for b in data)


def feed(trace: KernelTrace, lines: list) -> None:
    for line in lines:
        trace._line(line)


needs_strace = pytest.mark.skipif(kernel_trace.problem() is not None, reason=f"no kernel trace here: {kernel_trace.problem()}")


@pytest.fixture
def trace(tmp_path):
    t = KernelTrace(str(tmp_path))
    t.cwd = "/box/home"
    t.pipe = "pipe:[777]"
    yield t
    t.close()


def test_strace_lines_become_the_engines_operations(trace):
    ck, tmp = "/box/home/ck/checkpoint.json", "/box/home/ck/checkpoint.json.tmp"
    feed(trace, [
        f'10 mkdir("{hx("ck")}", 0777) = 0',
        f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx("ck/checkpoint.json.tmp")}", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, '
        f'0666) = 3<{hx(tmp)}>',
        f'10 lseek(3<{hx(tmp)}>, 0, SEEK_CUR) = 0',
        f'10 write(3<{hx(tmp)}>, "{hx("{}")}", 2 <unfinished ...>',
        f'11 write(4<{hx("pipe:[777]")}>, "{hx("abcd")}", 4) = 4',
        '10 <... write resumed>) = 2',
        f'10 writev(3<{hx(tmp)}>, [{{iov_base="{hx("ab")}", iov_len=2}}, {{iov_base="{hx("cd")}", iov_len=2}}], 2) = 3',
        f'10 fsync(3<{hx(tmp)}>) = 0',
        f'10 close(3<{hx(tmp)}>) = 0',
        f'10 rename("{hx("ck/checkpoint.json.tmp")}", "{hx("ck/checkpoint.json")}") = 0',
        f'10 unlink("{hx("ck/gone")}") = -1 ENOENT (No such file or directory)',
        f'10 chdir("{hx("ck")}") = 0',
        f'10 unlinkat(AT_FDCWD<{hx("/box/home/ck")}>, "{hx("old")}", 0) = 0',
        '10 +++ exited with 0 +++',
    ])
    assert trace.tampered is None
    assert trace.wire == 4
    ops = trace.take(10)
    assert [(op.kind, op.path, op.dest) for op in ops] == [
        ("mkdir", "/box/home/ck", None), ("open", tmp, None), ("write", tmp, None), ("write", tmp, None),
        ("fsync", tmp, None), ("close", tmp, None), ("rename", tmp, ck), ("unlink", "/box/home/ck/old", None)]
    assert ops[1].flags == {"create", "trunc"}
    # writev's bytes are the buffers joined, cut to what the call returned; offsets follow the writes.
    assert [(op.data, op.offset) for op in ops[2:4]] == [(b"{}", 0), (b"abc", 2)]


def test_a_file_with_no_name_yet_compares_with_the_recorders_placeholder(trace):
    """O_TMPFILE: strace shows the descriptor as `/dir/#inode` followed by `(deleted)`, and linkat names
    it through /proc/self/fd; the recorder calls the same file `.O_TMPFILE-N`. Both are one save."""
    ck = "/box/home/ck"
    nameless = f"{ck}/#2147927"
    feed(trace, [
        f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx("ck")}", O_WRONLY|O_CLOEXEC|O_TMPFILE, 0600) = '
        f'3<{hx(nameless)}>(deleted)',
        f'10 write(3<{hx(nameless)}>(deleted), "{hx("{}")}", 2) = 2',
        f'10 linkat(AT_FDCWD<{hx("/box/home")}>, "{hx("/proc/self/fd/3")}", AT_FDCWD<{hx("/box/home")}>, '
        f'"{hx("ck/checkpoint.json")}", AT_SYMLINK_FOLLOW) = 0',
    ])
    assert trace.tampered is None
    kernel = trace.take(10)
    assert [(op.kind, op.path, op.dest) for op in kernel] == [
        ("open", nameless, None), ("write", nameless, None), ("link", nameless, f"{ck}/checkpoint.json")]
    placeholder = f"{ck}/.O_TMPFILE-4"
    recorded = [Op(0, "open", api="os.open", path=placeholder, handle=4, flags=frozenset({"tmpfile"})),
                Op(1, "write", api="os.write", path=placeholder, handle=4, offset=0, data=b"{}", size=2),
                Op(2, "link", api="os.link", path=placeholder, dest=f"{ck}/checkpoint.json", handle=4,
                   flags=frozenset({"tmpfile"}))]
    ops, problem = reconcile(recorded, kernel, [ck])
    assert problem is None
    # The link names the file by its descriptor: the replay gives checkpoint.json the nameless file's bytes.
    assert ops[2].handle == ops[0].handle and "tmpfile" in ops[2].flags
    assert final_listing(ops, {}, ck) == {"checkpoint.json": b"{}"}


def test_operations_are_handed_out_by_the_message_they_came_before(trace):
    path = "/box/home/a"
    feed(trace, [
        f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx("a")}", O_WRONLY|O_CREAT, 0666) = 3<{hx(path)}>',
        f'10 write(5<{hx("pipe:[777]")}>, "{hx("msg1")}", 4) = 4',
        f'10 write(3<{hx(path)}>, "{hx("x")}", 1) = 1',
        f'10 write(5<{hx("pipe:[777]")}>, "{hx("msg2")}", 4) = 4',
    ])
    assert [op.kind for op in trace.take(4)] == ["open"]
    assert [op.kind for op in trace.take(8)] == ["write"]
    assert trace.take(8) == []


def test_a_line_strace_would_never_write_is_tampering(trace):
    feed(trace, ['10 write(3<x>, "ab", 2) = 2', "pretend this is a rename"])
    assert "never write" in trace.tampered


def test_a_forged_atomic_save_is_refused_and_the_kernels_in_place_one_is_kept():
    ck, tmp = "/w/ck/checkpoint.json", "/w/ck/checkpoint.json.tmp"

    def kernel():
        return [Op(-1, "open", api="openat", path=ck, handle=1, flags=frozenset({"create", "trunc"})),
                Op(-1, "write", api="write", path=ck, handle=1, data=b"{}", size=2)]
    honest = [Op(0, "open", api="open", path=ck, handle=7, flags=frozenset({"create", "trunc", "existed"})),
              Op(1, "write", api="write", path=ck, handle=7, data=b"{}"),
              Op(2, "flush", api="flush", path=ck, handle=7)]
    ops, problem = reconcile(honest, kernel(), ["/w/ck"])
    assert problem is None
    # The kernel's operations, with the recorder's words: open() (not openat), and that the file existed.
    assert [(op.kind, op.api, op.handle) for op in ops] == [("open", "open", 1), ("write", "write", 1)]
    assert "existed" in ops[0].flags
    forged = [Op(0, "open", api="open", path=tmp, handle=7, flags=frozenset({"create", "trunc"})),
              Op(1, "write", api="write", path=tmp, handle=7, data=b"{}"),
              Op(2, "fsync", api="os.fsync", path=tmp, handle=7),
              Op(3, "rename", api="os.replace", path=tmp, dest=ck)]
    ops, said = reconcile(forged, kernel(), ["/w/ck"])
    assert said.startswith(MISMATCH) and "os.fsync of ck/checkpoint.json.tmp" in said and "never saw" in said
    assert [op.path for op in ops] == [ck, ck], "what is kept is still what the kernel saw"
    # Other bytes claimed for a write the kernel saw: the kernel's bytes are kept, and nothing is refused.
    other_bytes = [honest[0], Op(1, "write", api="write", path=ck, handle=7, data=b"[]")]
    ops, problem = reconcile(other_bytes, kernel(), ["/w/ck"])
    assert problem is None and ops[1].data == b"{}"
    # A write the recorder did not see is still a crash point, named by its system call; it fails nothing.
    ops, problem = reconcile(honest[:1], kernel(), ["/w/ck"])
    assert problem is None and [(op.kind, op.api) for op in ops] == [("open", "open"), ("write", "write")]
    # What the recorder says about other folders is not its to say: nothing there is compared or kept.
    ops, problem = reconcile(honest + [Op(3, "unlink", api="os.unlink", path="/elsewhere/x")], kernel(), ["/w/ck"])
    assert problem is None and len(ops) == 2


def test_printable_bytes_as_strace_prints_them_under_x_are_read_exactly(trace):
    """Under ``-x`` a JSON save is printed as it is: quotes escaped, newlines as ``\\n``, and commas,
    brackets and even ``) = 5`` inside the written string; a path holding ``>`` is printed in octal."""
    odd = "/box/home/ck/a>b, [c]"
    saved = b'{"messages": [{"content": "x, y) = 5"}],\n\t"turns": 3}\\'
    printed = saved.decode().replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    path = odd.replace(">", "\\76")
    feed(trace, [
        f'10 openat(AT_FDCWD</box/home>, "ck/a>b, [c]", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3<{path}>',
        f'10 write(3<{path}>, "{printed}", {len(saved)}) = {len(saved)}',
        f'10 writev(3<{path}>, [{{iov_base="a, b", iov_len=4}}, {{iov_base="\\"]", iov_len=2}}], 2) = 6',
        '10 write(5<pipe:[777]>, "' + "x" * 100_000 + '", 100000) = 100000',
        '10 write(1<pipe:[778]>, "printed, not on disk", 20) = 20',
    ])
    assert trace.tampered is None
    assert trace.wire == 100_000
    ops = trace.take(100_000)
    assert [(op.kind, op.path) for op in ops] == [("open", odd), ("write", odd), ("write", odd)]
    assert ops[1].data == saved and ops[2].data == b'a, b"]' and ops[2].offset == len(saved)


def test_a_claimed_o_sync_buys_nothing(trace):
    """The power-cut models take every write to an O_SYNC file as durable on return: the flags kept are
    the kernel's, so a recorded "sync" the kernel never saw changes nothing."""
    tmp = "/box/home/ck/c.tmp"
    feed(trace, [f'10 openat(AT_FDCWD</box/home>, "ck/c.tmp", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0666) = 3<{tmp}>',
                 f'10 openat(AT_FDCWD</box/home>, "ck/c.tmp", O_WRONLY|O_CREAT|O_DSYNC, 0666) = 4<{tmp}>'])
    plain, synced = trace.take(10)
    assert plain.flags == {"create", "trunc"} and synced.flags == {"create", "sync"}
    claimed = [Op(0, "open", api="os.open", path=tmp, handle=7, flags=frozenset({"create", "trunc", "sync"}))]
    ops, problem = reconcile(claimed, [plain], ["/box/home/ck"])
    assert problem is None and "sync" not in ops[0].flags
    honest = [Op(0, "open", api="os.open", path=tmp, handle=7, flags=frozenset({"create", "sync", "existed"}))]
    ops, problem = reconcile(honest, [synced], ["/box/home/ck"])
    assert problem is None and "sync" in ops[0].flags


def test_a_claimed_os_sync_must_be_one_the_kernel_saw(trace):
    """os.sync() makes every file durable for the power-cut models, so one that never happened is a lie."""
    # (a syncfs counts as sync when it names the box's own file system: its folder, the trace's root)
    feed(trace, ["10 sync() = 0", f"10 syncfs(3<{trace.root}/ck>) = 0"])
    kernel = trace.take(10)
    assert [op.kind for op in kernel] == ["sync", "sync"]
    assert reconcile([Op(0, "sync", api="os.sync"), Op(1, "sync", api="os.syncfs")], kernel, ["/box/home/ck"])[1] is None
    claimed = [Op(0, "sync", api="os.sync")]
    said = reconcile(claimed, [], ["/w/ck"])[1]
    assert "os.sync() (every file and folder made durable), which the kernel never saw" in said


def test_what_a_call_without_a_recorder_did_is_not_held_against_the_next(trace):
    """A sync() made during an unrecorded call (before byte 4 of the pipe) belongs to no recorded
    call: the next recorded call is taken from where it began."""
    feed(trace, ["10 sync() = 0", '10 write(5<pipe:[777]>, "done", 4) = 4',
                 '10 mkdir("/box/home/ck/sub", 0777) = 0', '10 write(5<pipe:[777]>, "msg2", 4) = 4'])
    recorded = [Op(0, "mkdir", api="os.mkdir", path="/box/home/ck/sub")]
    kept: list = []
    assert trace.settle(recorded, 8, ["/box/home/ck"], since=4, keep=lambda op: kept.append(op) or op) is None
    assert [(op.kind, op.api) for op in kept] == [("mkdir", "os.mkdir")]
    feed(trace, ["10 sync() = 0", '10 write(5<pipe:[777]>, "msg3", 4) = 4'])
    assert trace.settle([], 12, ["/box/home/ck"], since=8, keep=lambda op: kept.append(op) or op) is None
    assert [op.kind for op in kept] == ["mkdir", "sync"], "a sync inside the call is a crash point of its own"


def test_a_write_longer_than_one_read_of_the_trace_is_read_whole(trace):
    """A 10 MB save is one line of the trace, read in pieces of 4 MiB."""
    path = "/box/home/ck/c.tmp"
    data = b"x" * 10_000_000
    os.write(trace.fd, (f'10 openat(AT_FDCWD</box/home>, "ck/c.tmp", O_WRONLY|O_CREAT, 0666) = 3<{path}>\n'
                        f'10 write(3<{path}>, "').encode() + data + f'", {len(data)}) = {len(data)}\n'.encode()
             + b'10 write(5<pipe:[777]>, "done", 4) = 4\n')
    trace._read()
    assert trace.tampered is None and trace.wire == 4
    ops = trace.take(4)
    assert [op.kind for op in ops] == ["open", "write"] and ops[1].data == data


def test_the_crash_states_take_the_kernels_bytes():
    """The bytes kept are the kernel's, every one of them; a write the worker sent without its bytes is
    matched by its size."""
    ck = "/w/ck/checkpoint.json"
    real = b'{"messages": [' + b" " * 400 + b'], "turns": 0}'

    def kernel():
        return [Op(-1, "write", api="write", path=ck, handle=1, data=real, size=len(real))]
    forged = [Op(0, "write", api="os.write", path=ck, handle=7, data=real.replace(b'"turns": 0', b'"turns": 1'))]
    ops, problem = reconcile(forged, kernel(), ["/w/ck"])
    assert problem is None and ops[0].data == real and ops[0].api == "os.write"
    elided = [Op(0, "write", api="os.write", path=ck, handle=7, size=len(real), flags=frozenset({wire.ELIDED}))]
    ops, problem = reconcile(elided, kernel(), ["/w/ck"])
    assert problem is None and ops[0].data == real and wire.ELIDED not in ops[0].flags
    short = [Op(0, "write", api="os.write", path=ck, handle=7, size=len(real) - 1, flags=frozenset({wire.ELIDED}))]
    assert "write of" in reconcile(short, kernel(), ["/w/ck"])[1], "a write of a size the kernel never saw"


@needs_strace
@pytest.mark.strace
def test_a_real_trace_agrees_with_what_the_child_did(tmp_path):
    folder = tmp_path / "ck"
    r, w = os.pipe()
    trace = KernelTrace(str(tmp_path))
    code = (f"import os; os.makedirs('ck'); f = open('ck/c.tmp', 'w'); f.write('{{}}'); f.flush(); "
            f"os.fsync(f.fileno()); f.close(); os.replace('ck/c.tmp', 'ck/c.json'); os.write({w}, b'done')")
    command = trace.wrap([sys.executable, "-I", "-S", "-c", code], str(tmp_path))
    proc = subprocess.Popen(command, pass_fds=(w,) + trace.pass_fds, cwd=tmp_path)
    os.close(w)
    trace.started(r, proc)
    assert os.read(r, 4) == b"done"
    try:
        assert trace.catch_up(4)
        ops = [op for op in trace.take(4) if op.path and op.path.startswith(str(folder))]
    finally:
        proc.wait(timeout=30)
        trace.close()
        os.close(r)
    assert [op.kind for op in ops] == ["mkdir", "open", "write", "fsync", "close", "rename"]
    assert ops[2].data == b"{}" and ops[-1].dest == str(folder / "c.json")


def test_without_strace_grading_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(kernel_trace, "_problem", None)  # both restored afterwards, for the other tests
    monkeypatch.setattr(kernel_trace, "_checked", False)
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no strace on it
    assert "apt-get install -y strace" in kernel_trace.problem()
    monkeypatch.setattr(kernel_trace, "_checked", False)
    monkeypatch.setenv("CRASHCOURSE_KERNEL_TRACE", "0")
    assert "turned off" in kernel_trace.problem()


@pytest.mark.strace
@pytest.mark.skipif(kernel_trace.problem() is not None or os.uname().machine != "x86_64",
                    reason="needs the kernel trace, and io_uring_setup's x86-64 number")
def test_io_uring_is_refused_under_the_tracer(tmp_path):
    # io_uring changes files without a system call per change, so nothing of it would reach the trace.
    code = ("import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
            "r = libc.syscall(425, 8, ctypes.create_string_buffer(120)); print(r, ctypes.get_errno())")
    trace = KernelTrace(str(tmp_path))
    try:
        out = subprocess.run(trace.wrap([sys.executable, "-I", "-S", "-c", code], str(tmp_path)), pass_fds=trace.pass_fds,
                             capture_output=True, text=True, timeout=60).stdout.split()
    finally:
        trace.close()
    assert out == ["-1", "1"]  # EPERM


def _traced(tmp_path, code: str) -> list:
    """What the kernel saw a Python child do in ``tmp_path`` (the trace's own folder, as a box's is)."""
    r, w = os.pipe()
    trace = KernelTrace(str(tmp_path))
    command = trace.wrap([sys.executable, "-I", "-S", "-c", code + f"\nos.write({w}, b'done')"], str(tmp_path))
    proc = subprocess.Popen(command, pass_fds=(w,) + trace.pass_fds, cwd=tmp_path)
    os.close(w)
    trace.started(r, proc)
    try:
        assert os.read(r, 4) == b"done"
        assert trace.catch_up(4) and trace.tampered is None, trace.tampered
        return trace.take(4)
    finally:
        proc.wait(timeout=30)
        trace.close()
        os.close(r)


@needs_strace
@pytest.mark.strace
def test_one_file_has_one_name_however_the_code_spells_it(tmp_path):
    """``ck/./x``, ``ck//x``, a relative and an absolute path, a folder's descriptor with dir_fd=, a
    link to the folder and a dup()ed descriptor all name the one file the kernel resolved."""
    code = f"""import os
os.mkdir('ck')
os.symlink('ck', 'link')
fd = os.open('ck/./a.tmp', os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
os.write(fd, b'{{"turns": 1}}')
os.fsync(os.dup(fd))
os.close(fd)
d = os.open('ck', os.O_RDONLY)
os.rename('.//a.tmp', 'b.tmp', src_dir_fd=d, dst_dir_fd=d)
os.rename('link/b.tmp', {str(tmp_path / 'ck' / 'checkpoint.json')!r})
os.fsync(d)
"""
    ck = str(tmp_path / "ck")
    ops, problem = reconcile([], _traced(tmp_path, code), [ck])
    assert problem is None
    assert final_listing(ops, {}, ck) == {"checkpoint.json": b'{"turns": 1}'}
    opened = next(op for op in ops if op.kind == "open")
    syncs = [op for op in ops if op.kind == "fsync"]
    assert opened.path == f"{ck}/a.tmp" and syncs[0].handle == opened.handle and not syncs[0].is_dir
    assert syncs[1].is_dir and syncs[1].path == ck
    renames = [(op.path, op.dest) for op in ops if op.kind == "rename"]
    assert renames == [(f"{ck}/a.tmp", f"{ck}/b.tmp"), (f"{ck}/b.tmp", f"{ck}/checkpoint.json")]
    # Only the dup()ed descriptor was left open at the end: the file's close waits for it.
    assert [op.kind for op in ops].count("close") == 0


@needs_strace
@pytest.mark.strace
def test_an_fsync_of_another_file_is_never_credited_to_the_temp_file(tmp_path):
    """The recorder may claim the fsync was of the temp file: the kernel says which descriptor it was,
    and a power cut can still empty the checkpoint."""
    code = """import os
os.mkdir('ck')
fd = os.open('ck/c.tmp', os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
other = os.open('other.log', os.O_WRONLY | os.O_CREAT)
os.write(fd, b'{}')
os.fsync(other)
os.close(fd)
os.rename('ck/c.tmp', 'ck/checkpoint.json')
"""
    ck = str(tmp_path / "ck")
    kernel = _traced(tmp_path, code)
    tmp = f"{ck}/c.tmp"
    forged = [Op(0, "open", api="os.open", path=tmp, handle=1, flags=frozenset({"create", "trunc"})),
              Op(1, "write", api="os.write", path=tmp, handle=1, data=b"{}"),
              Op(2, "fsync", api="os.fsync", path=tmp, handle=1),
              Op(3, "rename", api="os.rename", path=tmp, dest=f"{ck}/checkpoint.json")]
    ops, problem = reconcile(forged, kernel, [ck])
    opened = next(op for op in ops if op.kind == "open" and op.path == tmp)
    sync = next(op for op in ops if op.kind == "fsync")
    assert sync.path == str(tmp_path / "other.log") and sync.handle != opened.handle
    assert problem is not None and "os.fsync of ck/c.tmp" in problem, "an fsync of the temp file the kernel never saw"
    empty = [s for s in crash_states(ops, {}, ck, models=("M3",)) if s.files.get("checkpoint.json") == b""]
    assert empty, "the power cut may leave checkpoint.json empty: the temp file was never fsynced"


@needs_strace
@pytest.mark.strace
def test_writes_the_recorder_never_saw_are_crash_points_named_by_their_call(tmp_path):
    """pwritev2 (os.pwritev with flags), writev and a write through ctypes: each is in the kernel's
    account, a crash point of its own, and nothing is refused for it."""
    code = """import os, ctypes
os.mkdir('ck')
fd = os.open('ck/checkpoint.json', os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
os.pwritev(fd, [b'{"a"', b': 1'], 0, os.RWF_DSYNC)
os.lseek(fd, 7, os.SEEK_SET)  # a pwrite leaves the position where it was
os.writev(fd, [b'}'])
ctypes.CDLL(None).write(fd, b'\\n', 1)
os.close(fd)
"""
    ck = str(tmp_path / "ck")
    ops, problem = reconcile([], _traced(tmp_path, code), [ck])
    assert problem is None
    writes = [(op.api, op.offset, op.data) for op in ops if op.kind == "write"]
    assert writes == [("pwritev2", 0, b'{"a": 1'), ("writev", 7, b"}"), ("write", 8, b"\n")]
    assert [("sync" in op.flags) for op in ops if op.kind == "write"] == [True, False, False], "RWF_DSYNC: durable"
    assert final_listing(ops, {}, ck) == {"checkpoint.json": b'{"a": 1}\n'}


@needs_strace
@pytest.mark.strace
def test_an_appending_descriptor_writes_at_the_end_in_the_replay(tmp_path):
    code = """import os
os.mkdir('ck')
with open('ck/journal.log', 'wb') as f:
    f.write(b'first\\n')
fd = os.open('ck/journal.log', os.O_WRONLY | os.O_APPEND)
os.write(fd, b'second\\n')
os.close(fd)
"""
    ck = str(tmp_path / "ck")
    ops, problem = reconcile([], _traced(tmp_path, code), [ck])
    assert problem is None and final_listing(ops, {}, ck) == {"journal.log": b"first\nsecond\n"}
    states = {s.files.get("journal.log") for s in crash_states(ops, {}, ck, models=("M1",))}
    assert states == {None, b"", b"first\n", b"first\nsecond\n"}


@needs_strace
@pytest.mark.strace
@pytest.mark.parametrize("how, words", [
    ("import mmap\nm = mmap.mmap(fd, 2)\nm[:2] = b'{}'\nm.close()", "mapped ck/checkpoint.json into memory"),
    ("os.symlink('checkpoint.json', 'ck/latest.json')", "symbolic link, ck/latest.json"),
])
def test_what_the_trace_cannot_follow_in_the_folder_is_refused_with_a_reason(tmp_path, how, words):
    code = f"""import os
os.mkdir('ck')
fd = os.open('ck/checkpoint.json', os.O_RDWR | os.O_CREAT)
os.ftruncate(fd, 2)
{how}
"""
    ck = str(tmp_path / "ck")
    problem = reconcile([], _traced(tmp_path, code), [ck])[1]
    assert problem is not None and words in problem
    # Outside the watched folder the same is no concern of the grader's.
    (tmp_path / "out").mkdir()
    elsewhere = code.replace("os.mkdir('ck')\n", "").replace("ck/", "")
    assert reconcile([], _traced(tmp_path / "out", elsewhere), [ck])[1] is None


def test_files_in_dev_shm_are_files_and_devices_are_not(trace):
    """A temp folder in /dev/shm (memory) holds ordinary files; /dev/null is no file a crash leaves."""
    feed(trace, ['10 openat(AT_FDCWD</box/home>, "/dev/shm/ck/c.tmp", O_WRONLY|O_CREAT, 0666) = 3</dev/shm/ck/c.tmp>',
                 '10 write(3</dev/shm/ck/c.tmp>, "{}", 2) = 2',
                 '10 openat(AT_FDCWD</box/home>, "/dev/null", O_WRONLY, 0666) = 4</dev/null>',
                 '10 write(4</dev/null>, "{}", 2) = 2'])
    ops, problem = reconcile([], trace.take(10), ["/dev/shm/ck"])
    assert problem is None and [(op.kind, op.path) for op in ops] == [("open", "/dev/shm/ck/c.tmp"),
                                                                      ("write", "/dev/shm/ck/c.tmp")]


@needs_strace
@pytest.mark.strace
def test_a_descriptor_number_belongs_to_its_own_process(tmp_path):
    """fd 5 in a forked child is not fd 5 in its parent: the kernel's descriptor table is per process.
    A child that reopens the temp file at the number where its parent holds another file, and a parent
    that then fsyncs its own file by that number, must not make the temp file look fsynced."""
    code = """import os, threading
os.mkdir('ck')
other = os.open('other.log', os.O_WRONLY | os.O_CREAT)
pid = os.fork()
if pid == 0:
    os.close(other)
    fd = os.open('ck/c.tmp', os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    assert fd == other
    os.write(fd, b'{}')
    os._exit(0)
os.waitpid(pid, 0)
os.fsync(other)
# A thread shares its process's table: its descriptor is the main thread's too.
box = []
t = threading.Thread(target=lambda: box.append(os.open('ck/t.tmp', os.O_WRONLY | os.O_CREAT | os.O_TRUNC)))
t.start(); t.join()
os.write(box[0], b'[]')
os.fsync(box[0])
os.close(box[0])
os.rename('ck/c.tmp', 'ck/checkpoint.json')
"""
    ck = str(tmp_path / "ck")
    ops = _traced(tmp_path, code)
    syncs = [op.path for op in ops if op.kind == "fsync"]
    assert syncs == [str(tmp_path / "other.log"), f"{ck}/t.tmp"]
    writes = [(op.path, op.data) for op in ops if op.kind == "write"]
    assert writes == [(f"{ck}/c.tmp", b"{}"), (f"{ck}/t.tmp", b"[]")]
    empty = [s for s in crash_states(ops, {}, ck, models=("M3",)) if s.files.get("checkpoint.json") == b""]
    assert empty, "the power cut may leave checkpoint.json empty: the temp file was never fsynced"


def test_the_cap_counts_all_but_the_workers_messages_to_the_judge(tmp_path):
    """The judge stops reading a trace past its cap, less the writes to its own pipe (each of which it
    reads from the pipe anyway). A write elsewhere whose bytes spell that pipe's name counts, and so
    does a line still being read, whatever it writes to: the judge never holds more of one than the cap."""
    judge_r, judge_w = os.pipe()

    def trace(*lines: bytes) -> KernelTrace:
        t = KernelTrace(str(tmp_path), cap=4096)
        t.started(judge_r, None)
        os.write(t.fd, b"".join(lines))
        t._read()
        return t

    pipe = f"pipe:[{os.fstat(judge_r).st_ino}]".encode()
    message = b'7 write(9<' + pipe + b'>, "' + b"m" * 1000 + b'", 1000) = 1000\n'
    other = b'7 write(5</dev/null>, "' + b"x" * 1000 + b'", 1000) = 1000\n'
    forged = b'7 write(5</dev/null>, "<' + pipe + b'>, ' + b"x" * 980 + b'", 1000) = 1000\n'
    try:
        t = trace(*[message] * 40, *[other] * 3)
        assert not t.flooded and t.refused is None and t.kit_text == 40 * len(message)
        t = trace(*[message] * 40, *[other] * 5)
        assert t.flooded and t.refused == kernel_trace.FLOOD.format(mib=0)
        assert t.parts == [] and t.tail == b""  # and nothing of it is kept
        assert trace(*[forged] * 5).flooded
        long_one = message[:-1].replace(b"m" * 1000, b"m" * 6000)  # not ended yet: counted
        assert trace(long_one).flooded
        assert not trace(*[other] * 5).catch_up(1, patience=30)  # at once: it waits for nothing more
    finally:
        os.close(judge_r)
        os.close(judge_w)


def test_a_copy_inside_the_kernel_takes_its_bytes_from_what_the_trace_wrote(trace):
    # strace prints no byte of a sendfile or copy_file_range; where the trace wrote the source itself
    # (made empty, then written whole), the copy's bytes are read from that: at an offset the call
    # names, or, from the descriptor's own position (which untraced reads may have moved), only for a
    # whole file copied from its start, as cp does. Anything else the trace cannot follow (a file that
    # was there before, a shared map, a splice into it, a symbolic link made) leaves copies without bytes.
    stage, tmp, old, mapped = ("/box/home/ck/stage", "/box/home/ck/checkpoint.json.tmp", "/box/home/ck/old",
                               "/box/home/ck/mapped")
    staged = "/box/home/ck/staged"
    feed(trace, [
        f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx("ck/stage")}", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3<{hx(stage)}>',
        f'10 write(3<{hx(stage)}>, "{hx("hello world")}", 11) = 11',
        f'10 pwrite64(3<{hx(stage)}>, "{hx("W")}", 1, 6) = 1',
        f'10 close(3<{hx(stage)}>) = 0',
        f'10 rename("{hx("ck/stage")}", "{hx("ck/staged")}") = 0',
        f'10 rename("{hx("ck/staged")}", "{hx("ck/staged")}") = 0',  # onto itself: nothing happens
        f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx("ck/staged")}", O_RDONLY) = 4<{hx(staged)}>',
        f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx("ck/checkpoint.json.tmp")}", O_WRONLY|O_CREAT|O_TRUNC, 0666) '
        f'= 5<{hx(tmp)}>',
        f'10 copy_file_range(4<{hx(staged)}>, NULL, 5<{hx(tmp)}>, NULL, 9223372035781033984, 0) = 11',  # cp's way
        f'10 copy_file_range(4<{hx(staged)}>, NULL, 5<{hx(tmp)}>, NULL, 9223372035781033984, 0) = 0',
        f'10 sendfile(5<{hx(tmp)}>, 4<{hx(staged)}>, [5] => [11], 6) = 6',
        f'10 copy_file_range(4<{hx(staged)}>, [0], 5<{hx(tmp)}>, [20], 3, 0) = 3',
        f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx("ck/staged")}", O_RDONLY) = 8<{hx(staged)}>',
        f'10 sendfile(5<{hx(tmp)}>, 8<{hx(staged)}>, NULL, 4) = 4',  # part of a file from its position
        f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx("ck/old")}", O_RDONLY) = 6<{hx(old)}>',
        f'10 sendfile(5<{hx(tmp)}>, 6<{hx(old)}>, NULL, 4) = 4',
        f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx("ck/mapped")}", O_RDWR|O_CREAT|O_TRUNC, 0666) = 7<{hx(mapped)}>',
        f'10 write(7<{hx(mapped)}>, "{hx("abcd")}", 4) = 4',
        f'10 mmap(NULL, 4, PROT_READ|PROT_WRITE, MAP_SHARED, 7<{hx(mapped)}>, 0) = 0x7f0000000000',
        f'10 copy_file_range(7<{hx(mapped)}>, [0], 5<{hx(tmp)}>, NULL, 4, 0) = 4',
        f'10 splice(9<pipe:[5]>, NULL, 4<{hx(staged)}>, [0], 2, 0) = 2',
        f'10 copy_file_range(4<{hx(staged)}>, [0], 5<{hx(tmp)}>, NULL, 2, 0) = 2',
    ])
    copies = [op for _, op in trace.ops if op.kind == "write" and op.api in ("sendfile", "copy_file_range")]
    assert [(op.data, op.offset, "cut" in op.flags) for op in copies] == [
        (b"hello World", 0, False), (b"", 11, False), (b" World", 11, False), (b"hel", 20, False),
        (b"", 17, True),   # four bytes of eleven from a position the trace cannot vouch for
        (b"", 21, True),   # a file that was there before the trace: its bytes are unknown
        (b"", 25, True),   # a file mapped for writing: its bytes may have changed with no call to show it
        (b"", 29, True),   # a file a splice wrote into: the pipe's bytes are no one's account
    ]

@needs_strace
@pytest.mark.strace
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="system call numbers for x86-64")
def test_calls_the_crash_states_cannot_follow_fail_as_on_a_kernel_without_them(tmp_path):
    """openat2 (which can truncate), native AIO (writes with no write call) and fallocate (holes, zeroed
    ranges) fail under the tracer as a kernel or file system without them fails them; Python's own
    posix_fallocate then writes its zeros itself, where the trace sees them."""
    code = """import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
class How(ctypes.Structure):
    _fields_ = [('flags', ctypes.c_uint64), ('mode', ctypes.c_uint64), ('resolve', ctypes.c_uint64)]
os.mkdir('ck')
with open('ck/checkpoint.json', 'w') as f:
    f.write('{}')
how = How(os.O_WRONLY | os.O_TRUNC, 0, 0)
said = []
r = libc.syscall(ctypes.c_long(437), ctypes.c_long(-100), b'ck/checkpoint.json', ctypes.byref(how), ctypes.c_long(24))
said.append((r, ctypes.get_errno()))
ctx = ctypes.c_ulong(0)
said.append((libc.syscall(ctypes.c_long(206), ctypes.c_long(8), ctypes.byref(ctx)), ctypes.get_errno()))
libc.fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
fd = os.open('ck/checkpoint.json', os.O_RDWR)
said.append((libc.fallocate(fd, 3, 0, 2), ctypes.get_errno()))
os.posix_fallocate(fd, 0, 4096)
os.close(fd)
assert said == [(-1, errno.ENOSYS), (-1, errno.ENOSYS), (-1, errno.EOPNOTSUPP)], said
assert open('ck/checkpoint.json').read(2) == '{}'
"""
    ops = _traced(tmp_path, code)
    ck = str(tmp_path / "ck" / "checkpoint.json")
    assert (tmp_path / "ck" / "checkpoint.json").stat().st_size == 4096
    zeros = [op for op in ops if op.kind == "write" and op.path == ck and op.data == b"\0"]
    assert zeros, "posix_fallocate's own zeros are in the trace"
    assert final_listing(ops, {}, str(tmp_path / "ck"))["checkpoint.json"][:2] == b"{}"


@needs_strace
@pytest.mark.strace
@pytest.mark.parametrize("how, words", [
    ("import mmap\nm = mmap.mmap(fd, 2, access=mmap.ACCESS_READ)\nm.close()",
     "shared from a descriptor open for writing"),
])
def test_a_read_only_shared_map_of_a_writable_file_is_refused(tmp_path, how, words):
    """mprotect (not traced) can make a shared map writable when its file was opened for writing."""
    test_what_the_trace_cannot_follow_in_the_folder_is_refused_with_a_reason(tmp_path, how, words)


@needs_strace
@pytest.mark.strace
@pytest.mark.parametrize("call", ["os.splice(r, fd, 2, offset_dst=0)", "os.sendfile(fd, src, 0, 2)",
                                  "os.copy_file_range(src, fd, 2, 0, 0)"])
def test_bytes_copied_inside_the_kernel_into_the_folder_are_refused(tmp_path, call):
    """splice, sendfile and copy_file_range: strace counts their bytes but prints none. From a pipe, or
    from a file the trace did not see written (there before it began), the crash states cannot hold them;
    with no word of shutil's (which gives a copy's bytes), the run is refused."""
    (tmp_path / "src").write_bytes(b"{}")
    code = f"""import os
os.mkdir('ck')
src = os.open('src', os.O_RDONLY)
r, w = os.pipe()
os.write(w, b'{{}}')
fd = os.open('ck/checkpoint.json', os.O_WRONLY | os.O_CREAT)
{call}
"""
    ops = _traced(tmp_path, code)
    ck = str(tmp_path / "ck")
    problem = kernel_trace.unknown_bytes(ops, [ck])
    assert problem is not None and "which copies them inside the kernel" in problem and "ck/checkpoint.json" in problem
    # Into a file outside the folder (or a pipe), no concern of the grader's.
    assert kernel_trace.unknown_bytes(ops, [str(tmp_path / "elsewhere")]) is None


@needs_strace
@pytest.mark.strace
def test_a_childs_chdir_does_not_move_its_parents_paths(tmp_path):
    """Each process has its own working folder (threads share theirs): a forked child that changes folder
    and exits leaves its parent's relative paths where the kernel resolved them."""
    code = """import os, threading
os.mkdir('ck')
with open('ck/checkpoint.json', 'w') as f:
    f.write('{}')
pid = os.fork()
if pid == 0:
    os.chdir('/')
    os._exit(0)
os.waitpid(pid, 0)
os.truncate('ck/checkpoint.json', 0)
t = threading.Thread(target=os.chdir, args=('ck',))
t.start(); t.join()
os.rename('checkpoint.json', 'moved.json')
"""
    ops = _traced(tmp_path, code)
    ck = str(tmp_path / "ck")
    assert [(op.kind, op.path) for op in ops if op.kind in ("truncate", "rename")] == [
        ("truncate", f"{ck}/checkpoint.json"), ("rename", f"{ck}/checkpoint.json")]


def test_rename_exchange_trades_the_two_files_and_syncfs_elsewhere_makes_nothing_durable(trace):
    root = trace.root
    tmp = f"{root}/ck/checkpoint.json.tmp"
    feed(trace, [
        f'10 openat(AT_FDCWD<{root}>, "ck/checkpoint.json.tmp", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3<{tmp}>',
        f'10 write(3<{tmp}>, "{{}}", 2) = 2',
        '10 close(3</x>) = 0',
        f'10 renameat2(AT_FDCWD<{root}>, "ck/checkpoint.json.tmp", AT_FDCWD<{root}>, "ck/checkpoint.json", '
        'RENAME_EXCHANGE) = 0',
        '10 syncfs(4</dev/null>) = 0',
        f'10 syncfs(5<{root}/ck>) = 0',
    ])
    ops = trace.take(10)
    assert [op.kind for op in ops] == ["open", "write", "close", "rename", "sync"]
    assert "exchange" in ops[3].flags
    old = {"checkpoint.json": b"[]"}
    assert final_listing(ops, {f"{root}/ck/{k}": v for k, v in old.items()}, f"{root}/ck") == {
        "checkpoint.json": b"{}", "checkpoint.json.tmp": b"[]"}


@needs_strace
@pytest.mark.strace
def test_writes_the_kernel_appends_are_appended_in_the_replay(tmp_path):
    """O_APPEND turned on with fcntl(F_SETFL), and pwritev2's RWF_APPEND: the kernel puts the bytes at the
    end whatever the descriptor's position or the offset named, and so does the replay."""
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "checkpoint.json").write_bytes(b"{}")
    code = """import fcntl, os
fd = os.open('ck/checkpoint.json', os.O_WRONLY)
fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
os.write(fd, b'[1]')
os.close(fd)
fd = os.open('ck/checkpoint.json', os.O_WRONLY)
os.pwritev(fd, [b'[2]'], 0, os.RWF_APPEND)
os.close(fd)
"""
    ops = _traced(tmp_path, code)
    ck = str(tmp_path / "ck")
    assert (tmp_path / "ck" / "checkpoint.json").read_bytes() == b"{}[1][2]"
    assert final_listing(ops, {f"{ck}/checkpoint.json": b"{}"}, ck) == {"checkpoint.json": b"{}[1][2]"}


def test_what_the_trace_holds_for_copies_is_capped_however_the_files_grow(trace):
    # Sizes the kernel took (a truncate far past the end, a write at a far offset) would be zeros the
    # judge holds: they count against the cap like written bytes, and past it the file is not held.
    from grader.grading.kernel_trace import HELD_CAP

    lines = []
    for i in range(4):
        path = f"/box/home/big{i}"
        lines += [f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx(f"big{i}")}", O_RDWR|O_CREAT|O_TRUNC, 0666) = 3<{hx(path)}>',
                  f'10 ftruncate(3<{hx(path)}>, {HELD_CAP // 2}) = 0',
                  f'10 pwrite64(3<{hx(path)}>, "{hx("x")}", 1, {HELD_CAP // 3}) = 1',
                  f'10 close(3<{hx(path)}>) = 0']
    feed(trace, lines)
    assert trace.contents.held <= HELD_CAP
    assert sum(len(h.data) for h in trace.contents.by_path.values() if h.data is not None) <= HELD_CAP
    assert [h.data is None for h in trace.contents.by_path.values()] == [False, False, True, True]
    # What is held is what the files hold now: a file emptied gives its bytes back for the next.
    feed(trace, [f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx("big0")}", O_WRONLY|O_TRUNC) = 3<{hx("/box/home/big0")}>',
                 f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx("big9")}", O_RDWR|O_CREAT|O_TRUNC, 0666) '
                 f'= 4<{hx("/box/home/big9")}>',
                 f'10 ftruncate(4<{hx("/box/home/big9")}>, {HELD_CAP // 4}) = 0'])
    assert trace.contents.held == HELD_CAP // 2 + HELD_CAP // 4
    assert trace.contents.by_path["/box/home/big9"].data is not None


def test_a_file_whose_name_reads_like_arguments_is_read_as_one_name(trace):
    # A path holding ", " and flag words must not be split as arguments (the trace reader must not fail).
    odd = "/box/home/ck/a, F_SETFL, O_APPEND"
    feed(trace, [
        f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx("ck/a, F_SETFL, O_APPEND")}", O_WRONLY|O_CREAT|O_TRUNC, 0666) '
        f'= 3<{hx(odd)}>',
        f'10 fcntl(3<{hx(odd)}>, F_GETFL) = 0x8001 (flags O_WRONLY|O_LARGEFILE)',
        f'10 fcntl(3<{hx(odd)}>, F_SETFL, O_WRONLY|O_APPEND) = 0',
        f'10 write(3<{hx(odd)}>, "{hx("x")}", 1) = 1',
    ])
    assert trace.tampered is None
    assert [op.offset for _, op in trace.ops if op.kind == "write"] == [-1]  # at the end, as O_APPEND puts it


@needs_strace
@pytest.mark.strace
def test_a_path_through_procs_links_names_the_file_they_lead_to(tmp_path):
    """/proc/self/root, /proc/self/cwd, /proc/thread-self/cwd, /proc/self/fd/N and /dev/fd/N (a link to the
    last) are links the kernel follows into the calling process: a truncate, a rename or a chdir through
    one acts on the file or folder it leads to, so the trace names that (a ``..`` after one climbs from
    there). Through another process's link (by its id) the trace cannot say which file it is: refused."""
    code = """import os
os.mkdir('ck')
for name in 'abcdefg':
    with open('ck/' + name, 'w') as f:
        f.write('{}')
d = os.open('ck', os.O_RDONLY)
here = os.getcwd()
os.truncate('/proc/self/root' + here + '/ck/a', 0)
os.truncate(f'/proc/self/fd/{d}/b', 0)
os.truncate(f'/dev/fd/{d}/c', 0)
os.truncate('/proc/thread-self/cwd/ck/../ck/d', 0)
os.rename('/proc/self/cwd/ck/e', f'/proc/self/fd/{d}/../ck/e2')
os.chdir(f'/proc/self/fd/{d}')
os.truncate('f', 0)
os.chdir(here)
fd = os.open('ck/g', os.O_WRONLY)
os.truncate(f'/proc/self/fd/{fd}', 1)
"""
    ck = str(tmp_path / "ck")
    ops, problem = reconcile([], _traced(tmp_path, code), [ck])
    assert problem is None
    assert [(op.kind, op.path, op.dest) for op in ops if op.kind in ("truncate", "rename")] == [
        ("truncate", f"{ck}/{name}", None) for name in "abcd"] + [("rename", f"{ck}/e", f"{ck}/e2")] + [
        ("truncate", f"{ck}/{name}", None) for name in "fg"]
    final = final_listing(ops, {f"{ck}/{name}": b"{}" for name in "abcdefg"}, ck)
    assert final == {"a": b"", "b": b"", "c": b"", "d": b"", "e2": b"{}", "f": b"", "g": b"{"}
    code = "import os\nos.mkdir('ck')\nopen('ck/a', 'w').close()\nos.truncate(f'/proc/{os.getpid()}/cwd/ck/a', 0)\n"
    (tmp_path / "other").mkdir()
    ops, problem = reconcile([], _traced(tmp_path / "other", code), [str(tmp_path / "other" / "ck")])
    assert problem and "/proc/" in problem and "cwd/ck/a" in problem and "through a link in /proc" in problem, problem


def test_a_copy_of_a_file_there_before_the_call_takes_the_bytes_the_judge_read_and_words_give_none(trace, tmp_path):
    """Before each call the judge reads what the watched folders hold (KernelTrace.seed): a copy the code
    makes of such a file inside the kernel (the checkpoint an earlier run left, copied aside with shutil)
    takes its bytes from that. The worker's words (shutil's audit event, which the code can raise itself,
    or the recorder, which it can edit) give no copy its bytes: a copy from a source no account holds (a
    memfd, a pipe) stays unknown, and refused in the folder, whatever the words claim."""
    trace.root = str(tmp_path)
    folder = tmp_path / "ck"
    folder.mkdir()
    (folder / "checkpoint.json").write_bytes(b'{"turns": 1}')
    trace.seed([str(folder)])
    ck, prev = str(folder / "checkpoint.json"), str(folder / "checkpoint.json.previous")
    feed(trace, [
        f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx(ck)}", O_RDONLY|O_CLOEXEC) = 3<{hx(ck)}>',
        f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx(prev)}", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 4<{hx(prev)}>',
        f'10 sendfile(4<{hx(prev)}>, 3<{hx(ck)}>, NULL, 8388608) = 12',
        f'10 sendfile(4<{hx(prev)}>, 3<{hx(ck)}>, NULL, 8388608) = 0',
        f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx(ck)}", O_WRONLY) = 5<{hx(ck)}>',
        f'10 sendfile(5<{hx(ck)}>, 6<{hx("/memfd:spaces (deleted)")}>, [0] => [12], 12) = 12',
    ])
    ops = [op for _, op in trace.ops]
    copies = [op for op in ops if op.kind == "write"]
    assert [(op.path, op.data, "cut" in op.flags) for op in copies] == [
        (prev, b'{"turns": 1}', False), (prev, b"", False), (ck, b"", True)]
    # Words that claim the spaces were the file's own bytes change nothing: the copy stays unknown.
    word = Op(0, "write", api="os.sendfile", path=ck, offset=0, data=b'{"turns": 1}')
    problem, _ = kernel_trace.label([word], [op for op in ops if kernel_trace.claimable_by_recorder(op, [str(folder)])],
                                    [str(folder)])
    assert problem is None and copies[2].data == b"" and "cut" in copies[2].flags
    refused = kernel_trace.unknown_bytes(ops, [str(folder)])
    assert refused and "12 bytes to ck/checkpoint.json with os.sendfile" in refused, refused


# -- whose child a task is (kernel_trace._CLONES) ------------------------------------------------------------
# In a box (the trace shows bwrap's clone with CLONE_NEWPID) a clone's value is an id in the box's pid
# namespace, which names no task of the trace (ids of strace's own): 99 is bwrap outside, 100 the box's
# first task (its id 1), 101 the worker it starts (2), and clones inside return 3, 4, 5...
FORK = "clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x7f00)"
THREAD = ("clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|CLONE_SETTLS|"
          "CLONE_PARENT_SETTID|CLONE_CHILD_CLEARTID, child_tid=0x7f01, parent_tid=0x7f01, exit_signal=0, "
          "stack=0x7f02, stack_size=0x7fff80, tls=0x7f03} => {parent_tid=[%d]}, 88)")
BOX = ["99 clone(child_stack=NULL, flags=CLONE_NEWNS|CLONE_NEWUSER|CLONE_NEWPID|SIGCHLD) = 100",
       '100 chdir("/box/home") = 0', f"100 {FORK} = 2"]


def _paths(trace, kind="truncate") -> list:
    return [op.path for op in trace.take(10 ** 9) if op.kind == kind]


def test_a_child_seen_after_its_fork_returned_in_a_box_is_its_parents(trace):
    """truncates_from_a_second_child's order: the first child moved to /; the second child's first call
    comes after the fork returned an id of the box's (4). It is the only clone whose child has not shown,
    so the truncate is resolved from its parent's folder, not from the last one any process moved to."""
    feed(trace, BOX + [
        f"101 {FORK} = 3",
        '102 chdir("/") = 0',
        f"101 {FORK} = 4",
        f'103 truncate("{hx("ck/checkpoint.json")}", 0) = 0',
        '101 truncate("ck/other", 0) = 0',
    ])
    assert trace.tampered is None
    assert _paths(trace) == ["/box/home/ck/checkpoint.json", "/box/home/ck/other"]


def test_a_child_seen_while_its_fork_is_unfinished_and_a_grandchild(trace):
    """The fork still unfinished when the child's first call shows; the child moves into ck and forks a
    grandchild (which shows after its fork returned, and after the first child moved again), whose relative
    path is the child's folder, not its grandparent's or the one the first child moved to last."""
    feed(trace, BOX + [
        f"101 {FORK} = 3",
        '102 chdir("/") = 0',
        f"101 {FORK[:-1]} <unfinished ...>",
        '103 chdir("ck") = 0',
        "101 <... clone resumed>, child_tidptr=0x7f00) = 4",
        '102 chdir("/tmp") = 0',
        f"103 {FORK} = 5",
        '104 truncate("checkpoint.json", 0) = 0',
        '104 +++ exited with 0 +++',
        '103 +++ exited with 0 +++',
        '101 truncate("ck/other", 0) = 0',
    ])
    assert trace.tampered is None
    assert _paths(trace) == ["/box/home/ck/checkpoint.json", "/box/home/ck/other"]


def test_a_descriptor_a_child_reopens_is_its_own_in_a_box(trace):
    """forges_fsync_across_processes's order: the child's calls come after its fork returned; its close and
    open of the temp file at the parent's number change its own table, so the parent's fsync of that
    number stays notes.log's; a thread of the child shares the child's table."""
    notes, tmp = "/box/home/ck/notes.log", "/box/home/ck/c.tmp"
    feed(trace, BOX + [
        f'101 openat(AT_FDCWD<{hx("/box/home")}>, "{hx("ck/notes.log")}", O_WRONLY|O_CREAT|O_APPEND, 0644) = 5<{hx(notes)}>',
        f"101 {FORK} = 3",
        f"102 close(5<{hx(notes)}>) = 0",
        f"102 {THREAD % 4} = 4",
        f'103 openat(AT_FDCWD<{hx("/box/home")}>, "{hx("ck/c.tmp")}", O_WRONLY|O_CREAT|O_TRUNC, 0644) = 5<{hx(tmp)}>',
        "103 +++ exited with 0 +++",
        f'102 write(5<{hx(tmp)}>, "{hx("{}")}", 2) = 2',
        "102 +++ exited with 0 +++",
        f"101 fsync(5<{hx(notes)}>) = 0",
    ])
    assert trace.tampered is None
    ops = trace.take(10 ** 9)
    assert [(op.kind, op.path) for op in ops if op.kind in ("write", "fsync")] == [("write", tmp), ("fsync", notes)]


def test_a_task_that_shows_only_by_its_exit_still_takes_its_birth(trace):
    """A thread that makes no traced call shows only by its exit line; after it, the next child is again
    the only birth left, and is tied exactly. A clone to be started again (ERESTARTNOINTR) made no child."""
    feed(trace, BOX + [
        f"101 {THREAD % 3} = 3",
        "102 +++ exited with 0 +++",
        f'101 {FORK} = ? ERESTARTNOINTR (To be restarted)',
        f"101 {FORK} = 4",
        '103 chdir("/") = 0',
        "103 +++ exited with 0 +++",
        f"101 {FORK} = 5",
        '104 truncate("ck/checkpoint.json", 0) = 0',
    ])
    assert trace.tampered is None and not trace.births and not trace.guessed
    assert _paths(trace) == ["/box/home/ck/checkpoint.json"]


def test_two_children_of_two_forks_are_a_guess_and_the_next_is_exact_again(trace):
    """Two forks return before either child shows, the parent's table changed between them: which is
    which is not known (their box ids say nothing of strace's), so each starts in a folder of its own guessed, named again once the kernel names
    it (AT_FDCWD<...>). Once both have shown, the next child is tied exactly again."""
    feed(trace, BOX + [
        '101 chdir("ck") = 0',
        f"101 {FORK} = 3",
        f'101 openat(AT_FDCWD<{hx("/box/home/ck")}>, "x", O_WRONLY|O_CREAT, 0666) = 4<{hx("/box/home/ck/x")}>',
        f"101 {FORK} = 4",
        '102 truncate("a", 0) = 0',
        f'103 openat(AT_FDCWD<{hx("/box/home/ck")}>, "b", O_WRONLY|O_TRUNC) = 3<{hx("/box/home/ck/b")}>',
        '101 chdir("/") = 0',
        '102 unlinkat(AT_FDCWD</box/home/ck>, "c", 0) = 0',
        '102 chdir("/tmp") = 0',
        f"101 {FORK} = 5",
        '104 truncate("d", 0) = 0',
    ])
    assert trace.tampered is None and trace.guessed == {"102", "103"} and not trace.births
    ops = trace.take(10 ** 9)
    # 101's truncate was named from a guess, then again from the folder the kernel named for it.
    assert [(op.kind, op.path) for op in ops if op.kind in ("truncate", "unlink")] == [
        ("truncate", "/box/home/ck/a"), ("unlink", "/box/home/ck/c"), ("truncate", "/d")]


def test_children_of_forks_that_start_them_alike_are_tied_whichever_is_which(trace):
    """A parent forks twice with nothing changed between (a pool of workers): whichever child is which,
    each starts with the same folder and descriptors, a copy of its own. One moves to / and the other
    truncates by a bare name in the parent's folder; neither is a guess."""
    feed(trace, BOX + [
        '101 chdir("ck") = 0',
        f"101 {FORK} = 3",
        f"101 {FORK[:-1]} <unfinished ...>",
        '102 chdir("/") = 0',
        "101 <... clone resumed>, child_tidptr=0x7f00) = 4",
        '103 truncate("a", 0) = 0',
        f'103 openat(AT_FDCWD<{hx("/box/home/ck")}>, "b", O_WRONLY|O_CREAT, 0666) = 5<{hx("/box/home/ck/b")}>',
        '102 truncate("c", 0) = 0',
        '101 truncate("d", 0) = 0',
    ])
    assert trace.tampered is None and not trace.guessed and not trace.births
    assert _paths(trace) == ["/box/home/ck/a", "/c", "/box/home/ck/d"]
    assert 5 in trace.tables["103"] and 5 not in trace.tables["102"] and 5 not in trace.tables["101"]


def test_an_id_used_again_after_its_task_ended_is_a_new_task(trace):
    """pid_max wrapped: a task's id comes back for a new one. Its exit line ends the old task (its folder
    was /), and the new one is tied to its own birth."""
    feed(trace, BOX + [
        f"101 {FORK} = 3",
        '102 chdir("/") = 0',
        "102 +++ exited with 0 +++",
        f"101 {FORK} = 4",
        '102 truncate("ck/checkpoint.json", 0) = 0',
    ])
    assert trace.tampered is None
    assert _paths(trace) == ["/box/home/ck/checkpoint.json"]


def test_without_a_pid_namespace_a_forks_value_names_its_child(trace):
    """No box: a clone's value is the child's id in strace's namespace, and names it even when two forks
    returned before either child showed."""
    feed(trace, [
        '100 chdir("ck") = 0',
        f"100 {FORK} = 101",
        '100 chdir("/") = 0',
        f"100 {FORK} = 102",
        '102 truncate("b", 0) = 0',
        '101 truncate("a", 0) = 0',
    ])
    assert trace.tampered is None and not trace.guessed
    assert _paths(trace) == ["/b", "/box/home/ck/a"]


@needs_strace
@pytest.mark.strace
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="system call numbers for x86-64")
def test_a_descriptor_number_closed_or_filled_without_an_open_names_what_the_kernel_says(tmp_path):
    """close_range closes descriptors with no close call, and a descriptor handed over a Unix socket (SCM_RIGHTS)
    or taken with pidfd_getfd arrives with no open: the number it takes may have named another file in the
    trace's table. A received descriptor shares the sent one's open file (and its position); one taken from
    another process is a file the trace never saw opened, whose writes land where it cannot say (refused in the
    folder)."""
    code = """import ctypes, os, socket
os.mkdir('ck')
with open('ck/checkpoint.json', 'w') as f:
    f.write('{"a": 1}')
a, b = socket.socketpair()
t = os.open('ck/t', os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
c = os.open('ck/checkpoint.json', os.O_WRONLY)
socket.send_fds(a, [b'x'], [c])
os.close(c)
os.closerange(t, t + 1)
_, fds, _, _ = socket.recv_fds(b, 1, 1)
assert fds == [t], (fds, t)
os.write(fds[0], b'  ')
os.write(fds[0], b'  ')
"""
    ck = str(tmp_path / "ck")
    ops, problem = reconcile([], _traced(tmp_path, code), [ck])
    assert problem is None and kernel_trace.unknown_bytes(ops, [ck]) is None
    opened = [op for op in ops if op.kind == "open" and op.path == f"{ck}/checkpoint.json"][-1]
    # The second write continues the first (the position is shared), back to back: one joined write, cut between.
    writes = [(op.path, op.handle, op.offset, op.data, list(op.cuts)) for op in ops if op.kind == "write"][-1:]
    assert writes == [(f"{ck}/checkpoint.json", opened.handle, 0, b"    ", [2])]
    assert final_listing(ops, {}, ck)["checkpoint.json"] == b'    : 1}'
    code = """import ctypes, os
os.mkdir('ck')
with open('ck/checkpoint.json', 'w') as f:
    f.write('{"a": 1}')
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open('ck/checkpoint.json', os.O_WRONLY)
other = libc.syscall(438, os.pidfd_open(os.getpid()), fd, 0)
assert other > 0, ctypes.get_errno()
os.write(other, b'  ')
"""
    (tmp_path / "other").mkdir()
    ops = _traced(tmp_path / "other", code)
    problem = kernel_trace.unknown_bytes(ops, [str(tmp_path / "other" / "ck")])
    assert problem and "through a descriptor the grader never saw opened" in problem, problem


@needs_strace
@pytest.mark.strace
def test_text_in_the_bytes_a_socket_carries_hands_no_descriptor_over(tmp_path):
    """strace prints what a message carries as well as its SCM_RIGHTS: a message whose text reads like
    SCM_RIGHTS must not rebind a descriptor in the trace's table (spaces written over the checkpoint were
    replayed onto the temp file, and the replay kept the old checkpoint)."""
    ck = str(tmp_path / "ck")
    code = f"""import os, socket
os.mkdir('ck')
with open('ck/checkpoint.json', 'w') as f:
    f.write('{{"a": 1}}')
a, b = socket.socketpair()
t = os.open('ck/t', os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
c = os.open('ck/checkpoint.json', os.O_WRONLY)
a.sendmsg([('cmsg_type=SCM_RIGHTS, cmsg_data=[%d<{ck}/t>]' % t).encode()])
b.recv(200)
a.send(('cmsg_type=SCM_RIGHTS, cmsg_data=[%d<{ck}/t>]' % c).encode())
b.recvmsg(200)
os.write(c, b'    ')
"""
    ops, problem = reconcile([], _traced(tmp_path, code), [ck])
    assert problem is None
    assert final_listing(ops, {}, ck)["checkpoint.json"] == b'    : 1}' == (tmp_path / "ck" / "checkpoint.json").read_bytes()


@needs_strace
@pytest.mark.strace
def test_a_child_not_yet_shown_moves_with_its_parents_folder(tmp_path):
    """The parent forks from inside ck, then renames ck aside before the child's first call: the child's
    truncate by a bare name lands in the folder aside, in the trace as in the kernel."""
    code = """import os
os.mkdir('ck')
with open('ck/checkpoint.json', 'w') as f:
    f.write('{"a": 1}')
os.chdir('ck')
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.read(r, 1)
    os.truncate('checkpoint.json', 0)
    os._exit(0)
os.rename('../ck', '../ck.aside')
os.write(w, b'x')
os.waitpid(pid, 0)
os.rename('../ck.aside', '../ck')
"""
    truncates = [op.path for op in _traced(tmp_path, code) if op.kind == "truncate"]
    assert truncates == [str(tmp_path / "ck.aside" / "checkpoint.json")]


@needs_strace
@pytest.mark.strace
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="system call numbers for x86-64")
def test_names_traded_by_rename_exchange_trade_what_they_are(tmp_path):
    """A folder and a file traded with RENAME_EXCHANGE, the file opened under the folder's name, then traded
    back: its fsync is a file's, not the folder's (which would credit a folder fsync that never happened)."""
    code = """import os, ctypes
libc = ctypes.CDLL(None, use_errno=True)
def exch(a, b):
    assert libc.syscall(316, -100, a.encode(), -100, b.encode(), 2) == 0, ctypes.get_errno()
os.mkdir('ck')
os.close(os.open('ck.f', os.O_WRONLY | os.O_CREAT, 0o600))
exch('ck', 'ck.f')
fd = os.open('ck', os.O_RDONLY)
exch('ck', 'ck.f')
os.fsync(fd)
os.close(fd)
"""
    fsyncs = [op for op in _traced(tmp_path, code) if op.kind == "fsync"]
    assert [(op.path, op.is_dir) for op in fsyncs] == [(str(tmp_path / "ck"), False)]


@needs_strace
@pytest.mark.strace
@pytest.mark.bubblewrap
def test_children_grandchildren_threads_and_programs_in_a_real_box_act_from_their_own_folder_and_table(tmp_path):
    """In a real box, under the tracer grade runs (a clone there returns ids of the box's pid namespace):
    while a first child sits in /, a child that moved into ck truncates through a grandchild and a thread
    by the bare name, a program started by subprocess (vfork, exec) by a path relative to the parent's
    folder, and a child dup2()s the temp file onto the number where its parent holds notes.log, which the
    parent then fsyncs: each call is the kernel's, on the file the kernel resolved."""
    from grader.grading import bubblewrap
    if bubblewrap.check() is not None:
        pytest.skip(bubblewrap.check())
    code = """import os, subprocess, sys, threading
os.mkdir('ck')
with open('ck/checkpoint.json', 'w') as f:
    f.write('{}')
r, w = os.pipe()
r2, w2 = os.pipe()
mover = os.fork()
if mover == 0:
    os.chdir('/')
    os.write(w2, b'x')
    os.read(r, 1)
    os._exit(0)
os.read(r2, 1)
pid = os.fork()
if pid == 0:
    os.chdir('ck')
    grandchild = os.fork()
    if grandchild == 0:
        os.truncate('checkpoint.json', 1)
        os._exit(0)
    os.waitpid(grandchild, 0)
    t = threading.Thread(target=os.truncate, args=('checkpoint.json', 2))
    t.start()
    t.join()
    os._exit(0)
os.waitpid(pid, 0)
subprocess.run([sys.executable, '-I', '-S', '-c', "import os; os.truncate('ck/checkpoint.json', 3)"], check=True)
notes = os.open('notes.log', os.O_WRONLY | os.O_CREAT)
child = os.fork()
if child == 0:
    fd = os.open('ck/c.tmp', os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, notes)
    os.write(notes, b'{}')
    os._exit(0)
os.waitpid(child, 0)
os.fsync(notes)
os.write(w, b'x')
os.waitpid(mover, 0)
"""
    judge_r, judge_w = os.pipe()
    trace = KernelTrace(str(tmp_path))
    argv = [sys.executable, "-I", "-S", "-c", code + f"\nos.write({judge_w}, b'done')"]
    command = trace.wrap(bubblewrap.command(str(tmp_path), argv, cwd=str(tmp_path), limits=bubblewrap.Limits()),
                         str(tmp_path))
    proc = subprocess.Popen(command, pass_fds=(judge_w,) + trace.pass_fds, cwd="/")
    os.close(judge_w)
    trace.started(judge_r, proc)
    try:
        assert os.read(judge_r, 4) == b"done"
        assert trace.catch_up(4) and trace.tampered is None, trace.tampered
        ops = trace.take(4)
    finally:
        proc.wait(timeout=60)
        trace.close()
        os.close(judge_r)
    ck = str(tmp_path / "ck")
    assert [(op.path, op.size) for op in ops if op.kind == "truncate"] == [(f"{ck}/checkpoint.json", n) for n in (1, 2, 3)]
    assert [op.path for op in ops if op.kind == "write" and op.path.startswith(str(tmp_path))] == [
        f"{ck}/checkpoint.json", f"{ck}/c.tmp"]
    assert [op.path for op in ops if op.kind == "fsync"] == [str(tmp_path / "notes.log")]
    assert trace.namespaced and not trace.guessed, trace.guessed


def test_a_name_made_a_file_is_no_folder_whatever_the_disk_holds_when_the_judge_looks(trace, tmp_path):
    """The judge reads the trace a moment after the calls: a file made at the folder's name while the folder was
    aside, opened read-only and fsynced once the folder is back, is a file's fsync (the disk, by then, holds a
    folder there). A writing open is never a folder's (the kernel refuses it), and the name stays a file's until
    the trace sees it replaced (the folder renamed back)."""
    trace.root = str(tmp_path)
    (tmp_path / "ck").mkdir()  # as the disk is when the judge reads the lines below
    ck = str(tmp_path / "ck")
    feed(trace, [
        f'10 rename("{hx(ck)}", "{hx(ck + ".real")}") = 0',
        f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx(ck)}", O_WRONLY|O_CREAT, 0600) = 3<{hx(ck)}>',
        f'10 close(3<{hx(ck)}>) = 0',
        f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx(ck)}", O_RDONLY|O_CLOEXEC) = 3<{hx(ck)}>',
        f'10 rename("{hx(ck)}", "{hx(ck + ".fake")}") = 0',
        f'10 rename("{hx(ck + ".real")}", "{hx(ck)}") = 0',
        f'10 fsync(3<{hx(ck + ".fake")}>) = 0',
        f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx(ck)}", O_RDONLY|O_CLOEXEC) = 4<{hx(ck)}>',
        f'10 fsync(4<{hx(ck)}>) = 0',
    ])
    syncs = [op for _, op in trace.ops if op.kind == "fsync"]
    assert [(op.path, op.is_dir) for op in syncs] == [(ck, False), (ck, True)]


def test_a_nameless_file_linked_by_its_own_descriptor_gets_its_name(trace):
    """linkat(fd, "", ..., AT_EMPTY_PATH) (a kernel since 6.10 lets the file's opener call it) names the file
    behind the descriptor, as linkat through /proc/self/fd does: the replay gives the name the file's bytes
    (it named a file called `#inode` that no crash state holds, so a correct save scored 0)."""
    ck = "/box/home/ck"
    nameless = f"{ck}/#2147928"
    feed(trace, [
        f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx("ck")}", O_WRONLY|O_CLOEXEC|O_TMPFILE, 0644) = '
        f'3<{hx(nameless)}>(deleted)',
        f'10 write(3<{hx(nameless)}>(deleted), "{hx("{}")}", 2) = 2',
        f'10 linkat(3<{hx(nameless)}>(deleted), "", AT_FDCWD<{hx("/box/home")}>, "{hx("ck/checkpoint.json.tmp")}", '
        'AT_EMPTY_PATH) = 0',
        f'10 close(3<{hx(ck + "/checkpoint.json.tmp")}>) = 0',
        f'10 rename("{hx("ck/checkpoint.json.tmp")}", "{hx("ck/checkpoint.json")}") = 0',
    ])
    ops, problem = reconcile([], trace.take(10), [ck])
    assert problem is None
    link = next(op for op in ops if op.kind == "link")
    assert link.handle == ops[0].handle and "tmpfile" in link.flags and link.dest == f"{ck}/checkpoint.json.tmp"
    assert final_listing(ops, {}, ck) == {"checkpoint.json": b"{}"}


def test_turning_append_off_on_an_appending_descriptor_is_refused_in_the_folder(trace):
    """An O_APPEND descriptor's writes land at the end; with O_APPEND turned off (fcntl F_SETFL) they land at its
    position (0 if it never wrote), which neither the trace nor the crash models follow for an appending open:
    spaces written over the checkpoint that way looked like spaces after it (still JSON). Refused, with why."""
    ck = "/box/home/ck/checkpoint.json"
    feed(trace, [
        f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx("ck/checkpoint.json")}", O_WRONLY|O_APPEND|O_CLOEXEC) = 3<{hx(ck)}>',
        f'10 fcntl(3<{hx(ck)}>, F_SETFL, O_WRONLY|O_APPEND|O_LARGEFILE) = 0',
        f'10 write(3<{hx(ck)}>, "{hx("  ")}", 2) = 2',
    ])
    ops, problem = kernel_trace.translate(trace.take(10), ["/box/home/ck"])
    assert problem is None  # (turning it on again, or on, changes nothing the replay cannot follow)
    feed(trace, [
        f'10 fcntl(3<{hx(ck)}>, F_SETFL, O_WRONLY|O_LARGEFILE) = 0',
        f'10 write(3<{hx(ck)}>, "{hx("  ")}", 2) = 2',
    ])
    taken = trace.take(10)
    # Outside the watched folders, no concern of the grader's.
    assert kernel_trace.translate(list(taken), ["/box/home/elsewhere"])[1] is None
    ops, problem = kernel_trace.translate(list(taken), ["/box/home/ck"])
    assert problem and "turned O_APPEND off" in problem and "ck/checkpoint.json" in problem, problem
    # pwritev2's RWF_NOAPPEND (Linux 6.9) does the same for one write; strace before 6.9 prints it as a number.
    for flag in ("RWF_NOAPPEND", "0x20 /* RWF_??? */"):
        feed(trace, [
            f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx("ck/checkpoint.json")}", O_WRONLY|O_APPEND) = 4<{hx(ck)}>',
            f'10 pwritev2(4<{hx(ck)}>, [{{iov_base="{hx("  ")}", iov_len=2}}], 1, 0, {flag}) = 2',
            f'10 pwritev2(4<{hx(ck)}>, [{{iov_base="{hx("  ")}", iov_len=2}}], 1, -1, RWF_DSYNC) = 2',
        ])
        taken = trace.take(10)
        assert [op.kind for op in taken if op.kind != "close"] == ["open", "append_off", "write", "write"], taken
        problem = kernel_trace.translate(taken, ["/box/home/ck"])[1]
        assert problem and "pwritev2 and RWF_NOAPPEND" in problem, problem


@needs_strace
@pytest.mark.strace
def test_a_working_folder_renamed_takes_its_relative_paths_along(tmp_path):
    """The kernel keeps a process's working folder by what it is: renamed (or traded with RENAME_EXCHANGE), the
    folder keeps being where a bare name resolves, whatever now sits at its old name."""
    code = """import os
os.mkdir('ck')
with open('ck/checkpoint.json', 'w') as f:
    f.write('{}')
here = os.getcwd()
os.chdir('ck')
os.rename(here + '/ck', here + '/aside')
os.mkdir(here + '/ck')
os.truncate('checkpoint.json', 0)
os.rmdir(here + '/ck')
os.rename(here + '/aside', here + '/ck')
os.truncate('checkpoint.json', 1)
"""
    ops = _traced(tmp_path, code)
    assert [op.path for op in ops if op.kind == "truncate"] == [str(tmp_path / "aside" / "checkpoint.json"),
                                                                str(tmp_path / "ck" / "checkpoint.json")]


def test_close_range_is_read_whether_strace_prints_its_bounds_as_numbers_or_descriptors(tmp_path):
    # strace 6 prints close_range(3, 4294967295, 0); older ones print the first bound as a descriptor.
    for line in ("7 close_range(3, 4294967295, 0) = 0", "7 close_range(3</tmp/churn.bin>, 0xffffffff, 0) = 0"):
        trace = KernelTrace(str(tmp_path))
        trace.close()
        trace._line('7 openat(AT_FDCWD</tmp>, "/tmp/churn.bin", O_WRONLY|O_CREAT|O_CLOEXEC, 0644) = 3</tmp/churn.bin>')
        assert 3 in trace.fds
        trace._line(line)
        assert 3 not in trace.fds and trace.tampered is None, trace.tampered


@needs_strace
@pytest.mark.strace
def test_a_descriptors_proc_link_after_a_rename_is_refused_not_named_by_the_old_name(tmp_path):
    """/proc/self/fd/N leads to the folder as it is now: after ck is renamed aside (and a new, empty ck made),
    a truncate through the old descriptor's link empties ck.aside's file. The trace, which knows the folder
    by the name it was opened at, cannot name it, and the run is refused rather than told the truncate
    missed the checkpoint."""
    ck = str(tmp_path / "ck")
    code = """import os
os.mkdir('ck')
with open('ck/checkpoint.json', 'w') as f:
    f.write('{"a": 1}')
d = os.open('ck', os.O_RDONLY | os.O_DIRECTORY)
os.rename('ck', 'ck.aside')
os.mkdir('ck')
os.truncate('/proc/self/fd/%d/checkpoint.json' % d, 0)
os.rmdir('ck')
os.rename('ck.aside', 'ck')
"""
    ops, problem = reconcile([], _traced(tmp_path, code), [ck])
    assert problem is not None and "/proc" in problem, problem


def test_a_copy_after_the_judge_laid_out_a_file_takes_the_bytes_laid_out(tmp_path):
    """Between two calls the judge may lay other bytes into a file the trace already follows (a crash state):
    an in-kernel copy of it in the next call copies those bytes, not the ones the first call wrote."""
    def hx(text):
        return "".join(f"\\x{b:02x}" for b in (text.encode() if isinstance(text, str) else text))
    trace = KernelTrace(str(tmp_path))
    trace.close()
    trace.cwd, trace.root = "/box/home", str(tmp_path)
    folder = tmp_path / "ck"
    folder.mkdir()
    ck, bak = str(folder / "checkpoint.json"), str(folder / "checkpoint.bak")
    for line in [f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx(ck)}", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3<{hx(ck)}>',
                 f'10 write(3<{hx(ck)}>, "{hx("OLD-CALL-1")}", 10) = 10', f'10 close(3<{hx(ck)}>) = 0']:
        trace._line(line)
    (folder / "checkpoint.json").write_bytes(b"JUDGE-LAID")
    trace.seed([str(folder)])
    for line in [f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx(ck)}", O_RDONLY|O_CLOEXEC) = 3<{hx(ck)}>',
                 f'10 openat(AT_FDCWD<{hx("/box/home")}>, "{hx(bak)}", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 4<{hx(bak)}>',
                 f'10 sendfile(4<{hx(bak)}>, 3<{hx(ck)}>, NULL, 8388608) = 10']:
        trace._line(line)
    copied = [op.data for _, op in trace.ops if op.kind == "write" and op.path == bak]
    assert copied == [b"JUDGE-LAID"]
