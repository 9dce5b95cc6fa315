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

from grader.engine.ops import Op
from grader.grading import kernel_trace, wire
from grader.grading.kernel_trace import MISMATCH, KernelTrace, compare


def hx(text) -> str:
    data = text.encode() if isinstance(text, str) else text
    return "".join(f"\\x{b:02x}" for b in data)


def feed(trace: KernelTrace, lines: list) -> None:
    for line in lines:
        trace._line(line)


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
    assert compare(recorded, kernel, [ck]) is None


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


def test_a_forged_atomic_save_is_told_apart_from_the_in_place_one():
    ck, tmp = "/w/ck/checkpoint.json", "/w/ck/checkpoint.json.tmp"
    kernel = [Op(-1, "open", api="openat", path=ck, handle=1, flags=frozenset({"create", "trunc"})),
              Op(-1, "write", api="write", path=ck, handle=1, data=b"{}")]
    honest = [Op(0, "open", api="open", path=ck, handle=7, flags=frozenset({"create", "trunc", "existed"})),
              Op(1, "write", api="write", path=ck, handle=7, data=b"{}"),
              Op(2, "flush", api="flush", path=ck, handle=7)]
    assert compare(honest, kernel, ["/w/ck"]) is None
    forged = [Op(0, "open", api="open", path=tmp, handle=7, flags=frozenset({"create", "trunc"})),
              Op(1, "write", api="write", path=tmp, handle=7, data=b"{}"),
              Op(2, "fsync", api="os.fsync", path=tmp, handle=7),
              Op(3, "rename", api="os.replace", path=tmp, dest=ck)]
    said = compare(forged, kernel, ["/w/ck"])
    assert said.startswith(MISMATCH) and "checkpoint.json.tmp" in said
    other_bytes = [honest[0], Op(1, "write", api="write", path=ck, handle=7, data=b"[]")]
    assert "write of 2 bytes" in compare(other_bytes, kernel, ["/w/ck"])
    dropped = honest[:1]
    assert "missing from the recorded operations" in compare(dropped, kernel, ["/w/ck"])
    # Operations outside the watched folder are not compared.
    assert compare(honest + [Op(3, "unlink", api="os.unlink", path="/elsewhere/x")], kernel, ["/w/ck"]) is None


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


def test_a_claimed_o_sync_is_held_to_the_open_the_kernel_saw(trace):
    """The power-cut models take every write to an O_SYNC file as durable on return: a recorded
    "sync" the kernel never saw would buy DURABLE for nothing."""
    tmp = "/box/home/ck/c.tmp"
    feed(trace, [f'10 openat(AT_FDCWD</box/home>, "ck/c.tmp", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0666) = 3<{tmp}>',
                 f'10 openat(AT_FDCWD</box/home>, "ck/c.tmp", O_WRONLY|O_CREAT|O_DSYNC, 0666) = 4<{tmp}>'])
    plain, synced = trace.take(10)
    assert plain.flags == {"create", "trunc"} and synced.flags == {"create", "sync"}
    claimed = [Op(0, "open", api="os.open", path=tmp, handle=7, flags=frozenset({"create", "trunc", "sync"}))]
    assert compare(claimed, [plain], ["/box/home/ck"]).startswith(MISMATCH)
    honest = [Op(0, "open", api="os.open", path=tmp, handle=7, flags=frozenset({"create", "sync", "existed"}))]
    assert compare(honest, [synced], ["/box/home/ck"]) is None


def test_a_claimed_os_sync_must_be_one_the_kernel_saw(trace):
    """os.sync() makes every file durable for the power-cut models, so one that never happened is a lie."""
    feed(trace, ["10 sync() = 0", "10 syncfs(3</box/home/ck>) = 0"])
    kernel = trace.take(10)
    assert [op.kind for op in kernel] == ["sync", "sync"]
    assert compare([Op(0, "sync", api="os.sync"), Op(1, "sync", api="os.syncfs")], kernel, ["/box/home/ck"]) is None
    claimed = [Op(0, "sync", api="os.sync")]
    assert "os.sync() (every file and folder made durable), which the kernel never saw" in compare(claimed, [], ["/w/ck"])


def test_what_a_call_without_a_recorder_did_is_not_held_against_the_next(trace):
    """A sync() made during an unrecorded call (before byte 4 of the pipe) belongs to no recorded
    call: the next recorded call is compared from where it began."""
    feed(trace, ["10 sync() = 0", '10 write(5<pipe:[777]>, "done", 4) = 4',
                 '10 mkdir("/box/home/ck/sub", 0777) = 0', '10 write(5<pipe:[777]>, "msg2", 4) = 4'])
    recorded = [Op(0, "mkdir", api="os.mkdir", path="/box/home/ck/sub")]
    assert trace.check(recorded, 8, ["/box/home/ck"], since=4) is None
    feed(trace, ["10 sync() = 0", '10 write(5<pipe:[777]>, "msg3", 4) = 4'])
    assert "sync" in trace.check([], 12, ["/box/home/ck"], since=8), "a sync inside the call still counts"


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
    """Every byte of a write is compared, not only its first few hundred; a write the worker sent
    without its bytes agrees by size and offset, and the recorded operation then holds the kernel's."""
    ck = "/w/ck/checkpoint.json"
    real = b'{"messages": [' + b" " * 400 + b'], "turns": 0}'
    kernel = [Op(-1, "write", api="write", path=ck, handle=1, data=real, size=len(real))]
    forged = [Op(0, "write", api="os.write", path=ck, handle=7, data=real.replace(b'"turns": 0', b'"turns": 1'))]
    said = compare(forged, kernel, ["/w/ck"])
    assert said is not None and said.startswith(MISMATCH), "a write that differs past its first bytes"
    elided = [Op(0, "write", api="os.write", path=ck, handle=7, size=len(real), flags=frozenset({wire.ELIDED}))]
    assert compare(elided, kernel, ["/w/ck"]) is None
    assert elided[0].data == real and wire.ELIDED not in elided[0].flags
    short = [Op(0, "write", api="os.write", path=ck, handle=7, size=len(real) - 1, flags=frozenset({wire.ELIDED}))]
    assert "write of" in compare(short, kernel, ["/w/ck"])
    moved = [Op(0, "write", api="os.write", path=ck, handle=7, offset=4, size=len(real), flags=frozenset({wire.ELIDED}))]
    assert compare(moved, kernel, ["/w/ck"]) is not None, "the same bytes at another offset"


@pytest.mark.skipif(kernel_trace.problem() is not None, reason=f"no kernel trace here: {kernel_trace.problem()}")
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
