"""The recorder's own checks, in plain Python so they run under every interpreter the kit supports.

Run it directly (``python tests/recorder_check.py``) under Python 3.10 to 3.13: it exercises every
ordinary way to write a file, compares what the recorder saw with what happened (kind, bytes,
offset, order), and exits non-zero with one line per mismatch. ``tests/test_recorder.py`` runs
each check in-process under pytest and this script under the other interpreters.

Only the standard library is imported here (plus ``grader.engine.recorder`` and ``grader.engine.crash_models``,
which import nothing else), so an interpreter without pytest or Hypothesis can run it.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from os import replace as replace_bound_at_import  # noqa: E402 - bound before any Recorder exists
from os import write as write_bound_at_import  # noqa: E402

from grader.engine.crash_models import crash_states  # noqa: E402
from grader.engine.ops import write_parts  # noqa: E402
from grader.engine.recorder import FS_KINDS, Recorder  # noqa: E402

CHECKS = []
BIG = {"messages": ["ticket %d: ünïcode ☕ " % i * 3 for i in range(800)]}  # ~50 KiB of JSON


class Mismatch(AssertionError):
    """The recorder saw something other than what happened."""


def check(fn):
    CHECKS.append(fn)
    return fn


def expect(condition, message):
    if not condition:
        raise Mismatch(message)


def record(directory, fn):
    with Recorder(watch=[directory]) as rec:
        fn()
    return rec


def fs_ops(rec, directory):
    """The file-system operations on files in ``directory`` (or on the directory itself), each write as the
    call it was: the recorder joins writes made back to back (grader.engine.ops.join_write) and keeps where
    each ended."""
    directory = os.path.abspath(directory)
    return [part for op in rec.ops if op.kind in FS_KINDS and op.path is not None
            and (os.path.dirname(op.path) == directory or op.path == directory) for part in write_parts(op)]


def shape(ops):
    """``[(kind, name), ...]``: enough to compare the order of what happened."""
    return [(op.kind, os.path.basename(op.path)) for op in ops]


def writes_of(ops, name):
    return [op for op in ops if op.kind == "write" and os.path.basename(op.path) == name]


def expect_contiguous(writes, expected, what):
    """The writes, in order, start at offset 0, follow each other, and add up to ``expected``."""
    offset = 0
    for op in writes:
        expect(op.offset == offset, f"{what}: a write landed at offset {op.offset}, expected {offset}")
        offset += len(op.data)
    joined = b"".join(op.data for op in writes)
    expect(joined == expected, f"{what}: the recorded writes carry {len(joined)} bytes, the file holds {len(expected)}")


def expect_clean(rec, what):
    expect(not rec.unseen, f"{what}: the recorder reported unseen operations it should have seen: {rec.unseen[:2]}")


def m1_after(rec, directory, index):
    """The M1 crash state right after operation ``index`` (the directory a kill there leaves)."""
    for state in crash_states(rec.ops, rec.initial, directory, models=("M1",), initial_dirs=rec.initial_dirs):
        if state.point == index + 1:
            return state.files
    raise Mismatch(f"no M1 crash state after operation {index}")


def read(path):
    with open(path, "rb") as f:
        return f.read()


# -- open() and json.dump, Python's buffer against the OS --------------------------------------------

@check
def open_and_json_dump(d):
    p = os.path.join(d, "checkpoint.json")

    def save():
        with open(p, "w", encoding="utf-8") as f:
            json.dump(BIG, f)
    rec = record(d, save)
    ops = fs_ops(rec, d)
    expect(ops[0].kind == "open" and {"create", "trunc"} <= ops[0].flags,
           f"open(..., 'w') should be recorded as an open that creates and empties; got {shape(ops)[:1]}")
    expect(ops[-1].kind == "close", f"the last operation should be the close; got {shape(ops)[-1:]}")
    writes = writes_of(ops, "checkpoint.json")
    expect(len(writes) > 3, f"a {len(read(p))}-byte json.dump should reach the OS in several buffer flushes, "
                            f"recorded {len(writes)} writes")
    expect_contiguous(writes, read(p), "open + json.dump")
    expect_clean(rec, "open + json.dump")


@check
def small_dump_stays_in_python_until_close(d):
    """Bytes json.dump leaves in Python's buffer are not written until the with block closes the file."""
    p = os.path.join(d, "checkpoint.json")

    def save():
        with open(p, "w", encoding="utf-8") as f:
            json.dump({"turns": 1}, f)
            rec_now.event("run_start", "dumped")  # a marker: json.dump has returned, the file is still open
    with Recorder(watch=[d]) as rec_now:
        save()
    kinds = [op.kind for op in rec_now.ops if op.kind in ("write", "run_start", "close")]
    expect(kinds == ["run_start", "write", "close"],
           f"a small dump should reach the OS only when the file closes; the recorder saw {kinds}")


@check
def big_dump_reaches_the_os_in_flushes(d):
    p = os.path.join(d, "checkpoint.json")

    def save():
        with open(p, "w", encoding="utf-8") as f:
            json.dump(BIG, f)
            rec_now.event("run_start", "dumped")
    with Recorder(watch=[d]) as rec_now:
        save()
    kinds = [op.kind for op in rec_now.ops if op.kind in ("write", "run_start")]
    marker = kinds.index("run_start")
    expect(marker > 0, "json.dump of 50 KiB should push full buffers to the OS before it returns")
    expect("write" in kinds[marker:], "the tail of the dump should still be in Python's buffer until close")
    expect_contiguous(writes_of(fs_ops(rec_now, d), "checkpoint.json"), read(p), "big dump")


@check
def replace_inside_the_with_block_leaves_an_empty_file(d):
    """os.replace before the file is closed: a kill after the rename finds checkpoint.json empty."""
    p = os.path.join(d, "checkpoint.json")
    with open(p, "w") as f:
        f.write('{"old": true}')

    def save():
        with open(p + ".tmp", "w") as f:
            json.dump({"turns": 2}, f)
            os.replace(p + ".tmp", p)
    rec = record(d, save)
    ops = fs_ops(rec, d)
    expect(shape(ops) == [("open", "checkpoint.json.tmp"), ("rename", "checkpoint.json.tmp"),
                          ("write", "checkpoint.json.tmp"), ("close", "checkpoint.json.tmp")],
           f"the rename should come before the bytes reach the OS; got {shape(ops)}")
    rename = next(op for op in rec.ops if op.kind == "rename")
    after = m1_after(rec, d, rename.index)
    expect(after == {"checkpoint.json": b""},
           f"a kill right after the rename should leave checkpoint.json empty; the crash state is {after}")
    expect(read(p) == b'{"turns": 2}', "the uncrashed run should leave the new file")


@check
def replace_inside_the_with_block_big_leaves_a_prefix(d):
    p = os.path.join(d, "checkpoint.json")

    def save():
        with open(p + ".tmp", "w", encoding="utf-8") as f:
            json.dump(BIG, f)
            os.replace(p + ".tmp", p)
    rec = record(d, save)
    rename = next(op for op in rec.ops if op.kind == "rename")
    after = m1_after(rec, d, rename.index)["checkpoint.json"]
    final = read(p)
    expect(0 < len(after) < len(final) and final.startswith(after),
           f"a kill after the rename should leave a strict prefix of the {len(final)} bytes; it left {len(after)}")


@check
def flushed_is_not_fsynced(d):
    """flush() reaches the OS (M1 keeps it); only fsync makes it survive a power cut (M3)."""
    p = os.path.join(d, "checkpoint.json")

    def save():
        with open(p, "wb") as f:
            f.write(b"abc")
            f.flush()
            rec_now.event("run_start", "flushed")
            os.fsync(f.fileno())
    with Recorder(watch=[d]) as rec_now:
        save()
    kinds = [op.kind for op in rec_now.ops if op.kind in ("write", "run_start", "fsync", "close")]
    expect(kinds == ["write", "run_start", "fsync", "close"], f"flush then fsync, seen as {kinds}")
    fsync = next(op for op in rec_now.ops if op.kind == "fsync")
    expect(not fsync.is_dir and fsync.path == os.path.abspath(p), f"fsync of the file recorded as {fsync.describe()}")
    marker = kinds.index("run_start")
    states = [s for s in crash_states(rec_now.ops, rec_now.initial, d, models=("M1", "M3"))
              if s.point == marker + 2]  # after open, write, marker
    m1 = [s.files.get("checkpoint.json") for s in states if s.model == "M1"]
    m3 = {s.files.get("checkpoint.json") for s in states if s.model == "M3"}
    expect(m1 == [b"abc"], f"after a flush a kill keeps the bytes; M1 rebuilt {m1}")
    expect(b"abc" in m3 and (b"" in m3 or None in m3),
           f"before fsync a power cut may keep or lose the bytes; M3 rebuilt {m3}")


# -- pathlib --------------------------------------------------------------------------------------

@check
def path_write_text_and_bytes(d):
    p = Path(d) / "checkpoint.json"
    text = json.dumps(BIG, ensure_ascii=False)
    rec = record(d, lambda: (p.write_text(text, encoding="utf-8"), (Path(d) / "b.bin").write_bytes(b"\x00\xff" * 9000)))
    ops = fs_ops(rec, d)
    expect(ops[0].kind == "open" and "trunc" in ops[0].flags, f"write_text should open and empty; got {shape(ops)[:1]}")
    expect_contiguous(writes_of(ops, "checkpoint.json"), text.encode("utf-8"), "Path.write_text")
    expect_contiguous(writes_of(ops, "b.bin"), b"\x00\xff" * 9000, "Path.write_bytes")
    expect(shape(ops).count(("close", "b.bin")) == 1, "write_bytes should close its file")
    expect_clean(rec, "pathlib writes")


@check
def path_replace_and_rename(d):
    p = Path(d) / "checkpoint.json"
    tmp = Path(d) / "checkpoint.json.tmp"

    def save():
        tmp.write_bytes(b"{}")
        tmp.replace(p)
        p.rename(Path(d) / "moved.json")
    rec = record(d, save)
    renames = [(op.api, os.path.basename(op.path), os.path.basename(op.dest)) for op in rec.ops if op.kind == "rename"]
    expect(renames == [("os.replace", "checkpoint.json.tmp", "checkpoint.json"),
                       ("os.rename", "checkpoint.json", "moved.json")],
           f"Path.replace and Path.rename should each be one rename; got {renames}")
    expect_clean(rec, "Path.replace/rename")


@check
def path_unlink_mkdir_touch(d):
    sub = Path(d) / "sub"

    def work():
        sub.mkdir()
        (sub / "x").touch()
        (sub / "x").unlink()
        sub.rmdir()
    rec = record(d, work)
    kinds = [(op.kind, os.path.basename(op.path)) for op in rec.ops if op.kind in FS_KINDS]
    expect(kinds[0] == ("mkdir", "sub") and ("unlink", "x") in kinds and kinds[-1] == ("rmdir", "sub"),
           f"Path.mkdir/touch/unlink/rmdir seen as {kinds}")
    expect(("open", "x") in kinds, f"Path.touch creates the file; seen as {kinds}")
    expect_clean(rec, "Path.mkdir/touch/unlink/rmdir")


# -- tempfile ---------------------------------------------------------------------------------------

@check
def named_temporary_file_in_dir(d):
    p = os.path.join(d, "checkpoint.json")
    names = []

    def save():
        with tempfile.NamedTemporaryFile("w", dir=d, delete=False, suffix=".tmp", encoding="utf-8") as f:
            json.dump(BIG, f)
            names.append(f.name)
        os.replace(f.name, p)
    rec = record(d, save)
    ops = fs_ops(rec, d)
    tmp = os.path.basename(names[0])
    expect(ops[0].kind == "open" and os.path.basename(ops[0].path) == tmp and "create" in ops[0].flags,
           f"NamedTemporaryFile should be seen creating {tmp}; got {shape(ops)[:1]}")
    expect_contiguous(writes_of(ops, tmp), read(p), "NamedTemporaryFile")
    expect(shape(ops)[-2:] == [("close", tmp), ("rename", tmp)], f"close then rename; got {shape(ops)[-2:]}")
    expect_clean(rec, "NamedTemporaryFile")


@check
def mkstemp_and_fdopen(d):
    p = os.path.join(d, "checkpoint.json")

    def save():
        fd, tmp = tempfile.mkstemp(dir=d, prefix="ckpt-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(BIG, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    rec = record(d, save)
    ops = fs_ops(rec, d)
    tmp = os.path.basename(ops[0].path)
    expect(ops[0].kind == "open" and ops[0].api == "os.open" and tmp.startswith("ckpt-"),
           f"mkstemp's file should be seen as an os.open; got {shape(ops)[:1]}")
    expect(len({op.handle for op in ops if op.path == ops[0].path and op.kind != "rename"}) == 1,
           "os.fdopen should write through the descriptor mkstemp opened (one handle)")
    expect_contiguous(writes_of(ops, tmp), read(p), "mkstemp + os.fdopen")
    expect([k for k, _ in shape(ops)][-3:] == ["fsync", "close", "rename"], f"fsync, close, rename; got {shape(ops)[-3:]}")
    expect_clean(rec, "mkstemp + os.fdopen")


@check
def temp_file_in_the_system_temp_dir(d):
    """mkstemp() without dir: the write happens outside the directory, the rename crosses into it."""
    p = os.path.join(d, "checkpoint.json")

    def save():
        fd, tmp = tempfile.mkstemp()
        with os.fdopen(fd, "w") as f:
            f.write("{}")
        shutil.move(tmp, p)
    rec = record(d, save)
    moves = [op for op in rec.ops if op.kind in ("rename", "write") and op.path is not None]
    expect(any(op.kind == "write" and os.path.dirname(op.path) != os.path.abspath(d) for op in moves),
           "the temp file's write should be recorded where it happened, outside the directory")
    last = [op for op in rec.ops if op.kind in ("rename", "write", "open")][-1]
    # Same file system: shutil.move renames. Another file system: it copies (open + write into d).
    expect((last.kind == "rename" and last.dest == os.path.abspath(p)) or last.path == os.path.abspath(p),
           f"shutil.move should end at checkpoint.json; last operation: {last.describe()}")
    expect(read(p) == b"{}", "the move should leave the file")
    expect_clean(rec, "mkstemp + shutil.move")


# -- the os module ------------------------------------------------------------------------------------

@check
def os_open_write_loop_pwrite_fsync(d):
    p = os.path.join(d, "checkpoint.json")
    data = json.dumps(BIG).encode()

    def save():
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        view = memoryview(data)
        while view:
            n = os.write(fd, view[:5000])
            view = view[n:]
        os.pwrite(fd, b"{", 0)
        os.fsync(fd)
        os.close(fd)
        dfd = os.open(d, os.O_RDONLY)
        os.fsync(dfd)
        os.close(dfd)
    rec = record(d, save)
    ops = fs_ops(rec, d)
    writes = [op for op in ops if op.api == "os.write"]
    expect_contiguous(writes, data, "os.write loop")
    pwrite = [op for op in ops if op.api == "os.pwrite"]
    expect(len(pwrite) == 1 and pwrite[0].offset == 0 and pwrite[0].data == b"{",
           f"os.pwrite should be one write at offset 0; got {[op.describe() for op in pwrite]}")
    fsyncs = [(os.path.basename(op.path), op.is_dir) for op in ops if op.kind == "fsync"]
    expect(fsyncs == [("checkpoint.json", False), (os.path.basename(d), True)],
           f"an fsync of the file and one of the directory; got {fsyncs}")
    expect([k for k, _ in shape(ops)].count("close") == 1, "closing a directory descriptor is not a file operation")
    expect_clean(rec, "os.open/os.write")


@check
def os_fdatasync_writev_truncate(d):
    p = os.path.join(d, "log.bin")

    def work():
        fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
        os.writev(fd, [b"abc", b"defg"])
        os.ftruncate(fd, 5)
        os.fdatasync(fd)
        os.close(fd)
        os.truncate(p, 2)
    rec = record(d, work)
    ops = fs_ops(rec, d)
    expect([k for k, _ in shape(ops)] == ["open", "write", "truncate", "fsync", "close", "truncate"],
           f"writev, ftruncate, fdatasync, truncate seen as {shape(ops)}")
    expect(ops[1].data == b"abcdefg" and ops[2].size == 5 and ops[5].size == 2, "sizes and bytes as written")
    expect(read(p) == b"ab", "the file on disk")
    expect_clean(rec, "writev/ftruncate/fdatasync")


@check
def fsync_of_a_file_opened_for_reading(d):
    """A read-only descriptor opened by the real open() is named through the kernel when fsynced."""
    p = os.path.join(d, "checkpoint.json")
    with open(p, "w") as f:
        f.write("{}")

    def work():
        with open(p, "rb") as f:
            os.fsync(f.fileno())
    rec = record(d, work)
    fsyncs = [op for op in rec.ops if op.kind == "fsync"]
    expect(len(fsyncs) == 1 and fsyncs[0].path == os.path.abspath(p), f"fsync seen as {[o.describe() for o in fsyncs]}")
    expect_clean(rec, "fsync of a read-only descriptor")


@check
def os_remove_then_rename(d):
    p = os.path.join(d, "checkpoint.json")
    with open(p, "w") as f:
        f.write('{"old": 1}')

    def save():
        with open(p + ".tmp", "w") as f:
            f.write('{"new": 1}')
        os.remove(p)
        os.rename(p + ".tmp", p)
    rec = record(d, save)
    ops = fs_ops(rec, d)
    expect([k for k, _ in shape(ops)] == ["open", "write", "close", "unlink", "rename"], f"seen as {shape(ops)}")
    unlink = next(op for op in rec.ops if op.kind == "unlink")
    after = m1_after(rec, d, unlink.index)
    expect("checkpoint.json" not in after, f"a kill between remove and rename leaves no checkpoint.json: {after}")


@check
def opener_argument(d):
    p = os.path.join(d, "checkpoint.json")

    def save():
        with open(p, "w", opener=lambda path, flags: os.open(path, flags, 0o600)) as f:
            f.write("{}")
    rec = record(d, save)
    ops = fs_ops(rec, d)
    expect(shape(ops) == [("open", "checkpoint.json"), ("write", "checkpoint.json"), ("close", "checkpoint.json")],
           f"open(..., opener=) seen as {shape(ops)}")
    expect_clean(rec, "opener")


# -- names bound early and late --------------------------------------------------------------------------

@check
def from_os_import_replace_after_recording_starts(d):
    p = os.path.join(d, "checkpoint.json")

    def save():
        from os import replace  # bound now, while the recorder is active
        with open(p + ".tmp", "w") as f:
            f.write("{}")
        replace(p + ".tmp", p)
    rec = record(d, save)
    expect([k for k, _ in shape(fs_ops(rec, d))][-1] == "rename", "a replace imported during the run is recorded")
    expect_clean(rec, "from os import replace (late)")


@check
def from_os_import_replace_before_recording_is_reported(d):
    p = os.path.join(d, "checkpoint.json")

    def save():
        with open(p + ".tmp", "w") as f:
            f.write("{}")
        replace_bound_at_import(p + ".tmp", p)
    rec = record(d, save)
    expect(not any(op.kind == "rename" for op in rec.ops), "a replace bound before recording cannot be recorded")
    expect(any("os.rename" in u and "checkpoint.json" in u for u in rec.unseen),
           f"the early-bound replace must be reported in .unseen, got {rec.unseen}")


@check
def names_bound_early_are_recorded_in_the_namespaces_given(d):
    """Recorder(namespaces=[module globals]) swaps early-bound names there, and puts them back after."""
    p = os.path.join(d, "checkpoint.json")

    def save():
        fd = os.open(p + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        write_bound_at_import(fd, b'{"seen": true}')
        os.close(fd)
        replace_bound_at_import(p + ".tmp", p)
    with Recorder(watch=[d], namespaces=[globals()]) as rec:
        save()
    expect(shape(fs_ops(rec, d)) == [("open", "checkpoint.json.tmp"), ("write", "checkpoint.json.tmp"),
                                     ("close", "checkpoint.json.tmp"), ("rename", "checkpoint.json.tmp")],
           f"early-bound write and replace, with the module's namespace given, seen as {shape(fs_ops(rec, d))}")
    expect_clean(rec, "namespaces")
    expect(replace_bound_at_import is os.replace and write_bound_at_import is os.write,
           "the module's own names must be the real functions again after recording")


@check
def write_bound_before_recording_is_reported(d):
    """os.write raises no audit event, so it is caught by comparing the disk with the replayed trace."""
    p = os.path.join(d, "checkpoint.json")

    def save():
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        write_bound_at_import(fd, b'{"hidden": true}')
        os.close(fd)
    rec = record(d, save)
    expect(not any(op.kind == "write" for op in rec.ops), "a write bound before recording cannot be recorded")
    expect(any("checkpoint.json" in u for u in rec.unseen),
           f"the disk disagrees with the trace; that must be reported in .unseen, got {rec.unseen}")


@check
def routes_out_of_sight_are_reported(d):
    """A memory map, another program, a symlink: the recorder cannot follow them, so it says so."""
    import mmap
    import subprocess
    p = os.path.join(d, "checkpoint.json")
    with open(p, "wb") as f:
        f.write(b"{}      ")

    def by_mmap():
        with open(p, "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
            m[:2] = b"[]"

    def by_child():
        subprocess.run([sys.executable, "-c", "pass"], check=True)

    def by_symlink():
        os.symlink(p, os.path.join(d, "latest.json"))

    for what, fn in (("mmap", by_mmap), ("subprocess", by_child), ("symlink", by_symlink)):
        rec = record(d, fn)
        expect(rec.unseen, f"a write by {what} went unreported")


# -- a child made with os.fork ---------------------------------------------------------------------------

def _in_a_forked_child(work):
    """Run ``work`` in a child of os.fork that ends with os._exit (no clean-up, no atexit), and wait."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            work()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    expect(status == 0, f"the forked child failed (status {status})")


@check
def a_save_in_a_forked_child_reaches_the_parents_recording(d):
    """A save made in a forked child (temp file, fsync, rename, folder fsync; the parent waits) is as real
    as one made in the parent: its operations are recorded in the order they happened, between the
    parent's own, its handles apart from the parent's, and the disk agrees with the recording."""
    p = os.path.join(d, "checkpoint.json")

    def save(text):
        with open(p + ".tmp", "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(p + ".tmp", p)
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    with Recorder(watch=[d]) as rec:
        rec.event("tool_start", ("before",))
        _in_a_forked_child(lambda: save('{"turn": 1}'))
        rec.event("tool_start", ("between",))
        with open(os.path.join(d, "notes.txt"), "w") as f:  # the parent's own file, opened after the child's
            f.write("parent")
        _in_a_forked_child(lambda: save('{"turn": 2}'))
        rec.event("tool_start", ("after",))
    expect_clean(rec, "a save in a forked child")
    kinds = [(op.kind, os.path.basename(op.path) if op.path else op.payload[0]) for op in rec.ops
             if op.kind in ("tool_start", "open", "fsync", "rename")]
    one = [("open", "checkpoint.json.tmp"), ("fsync", "checkpoint.json.tmp"), ("rename", "checkpoint.json.tmp"),
           ("fsync", os.path.basename(d))]
    expected = [("tool_start", "before")] + one + [("tool_start", "between"), ("open", "notes.txt")] + one \
        + [("tool_start", "after")]
    expect(kinds == expected, f"the child's operations, in order, among the parent's: {kinds}")
    expect([op.index for op in rec.ops] == list(range(len(rec.ops))), "each operation has its own index, in order")
    opens = [op for op in rec.ops if op.kind == "open"]
    expect(len({op.handle for op in opens}) == 3, f"each open file has a handle of its own: {[op.handle for op in opens]}")
    expect_contiguous(writes_of(rec.ops, "checkpoint.json.tmp")[-1:], b'{"turn": 2}', "the second child's write")


@check
def a_forked_childs_route_out_of_sight_is_reported_in_the_parent(d):
    """What a forked child does out of the recorder's sight is reported by the parent's recording."""
    import subprocess

    def work():
        subprocess.run([sys.executable, "-c", "pass"], check=True)

    rec = record(d, lambda: _in_a_forked_child(work))
    expect(any("started another program" in u for u in rec.unseen), f"the child's subprocess went unreported: {rec.unseen}")


# -- io.FileIO, modes -----------------------------------------------------------------------------------

@check
def io_fileio(d):
    p = os.path.join(d, "raw.bin")

    def work():
        with io.FileIO(p, "w") as f:
            f.write(b"12345")
            f.write(b"678")
    rec = record(d, work)
    ops = fs_ops(rec, d)
    expect([k for k, _ in shape(ops)] == ["open", "write", "write", "close"], f"io.FileIO seen as {shape(ops)}")
    expect_contiguous(writes_of(ops, "raw.bin"), b"12345678", "io.FileIO (unbuffered: one write per call)")
    expect_clean(rec, "io.FileIO")


@check
def append_mode(d):
    p = os.path.join(d, "log.jsonl")
    with open(p, "w") as f:
        f.write('{"a": 1}\n')

    def work():
        with open(p, "a") as f:
            f.write('{"b": 2}\n')
    rec = record(d, work)
    ops = fs_ops(rec, d)
    expect(ops[0].kind == "open" and "append" in ops[0].flags and "trunc" not in ops[0].flags,
           f"append mode opens without emptying; got {ops[0].describe()}")
    w = writes_of(ops, "log.jsonl")
    expect(len(w) == 1 and w[0].offset == 9 and w[0].data == b'{"b": 2}\n',
           f"the append lands at the old end (offset 9); got {[op.describe() for op in w]}")
    expect_clean(rec, "append")


@check
def r_plus_without_truncate(d):
    """Overwriting a longer file with r+ and no truncate leaves the old tail: the crash state shows it."""
    p = os.path.join(d, "checkpoint.json")
    old = b'{"turns": 10, "messages": ["a long old history"]}'
    with open(p, "wb") as f:
        f.write(old)

    def save():
        with open(p, "r+") as f:
            f.write('{"turns": 11}')
    rec = record(d, save)
    ops = fs_ops(rec, d)
    expect(ops[0].kind == "open" and not ops[0].flags & {"trunc", "create"},
           f"r+ neither creates nor empties; got {ops[0].describe()}")
    w = writes_of(ops, "checkpoint.json")
    expect(len(w) == 1 and w[0].offset == 0, f"one write at offset 0; got {[op.describe() for op in w]}")
    final = m1_after(rec, d, len(rec.ops) - 1)["checkpoint.json"]
    expect(final == b'{"turns": 11}' + old[13:] == read(p), f"the rebuilt file keeps the old tail: {final!r}")
    expect_clean(rec, "r+")


# -- shutil ---------------------------------------------------------------------------------------------

@check
def shutil_copyfile_copy_move(d):
    src = os.path.join(d, "src.json")
    data = json.dumps(BIG).encode()
    with open(src, "wb") as f:
        f.write(data)

    def work():
        shutil.copyfile(src, os.path.join(d, "a.json"))
        shutil.copy(src, os.path.join(d, "b.json"))
        shutil.move(os.path.join(d, "b.json"), os.path.join(d, "c.json"))
    rec = record(d, work)
    ops = fs_ops(rec, d)
    for name in ("a.json", "b.json"):
        opened = [op for op in ops if op.kind == "open" and os.path.basename(op.path) == name]
        expect(len(opened) == 1 and "trunc" in opened[0].flags, f"shutil should open {name} emptying it")
        expect_contiguous(writes_of(ops, name), data, f"shutil copy into {name} (sendfile on Linux)")
    renames = [(os.path.basename(op.path), os.path.basename(op.dest)) for op in ops if op.kind == "rename"]
    expect(renames == [("b.json", "c.json")], f"shutil.move within a directory is one rename; got {renames}")
    expect_clean(rec, "shutil")


@check
def nothing_recorded_for_reads(d):
    p = os.path.join(d, "checkpoint.json")
    with open(p, "w") as f:
        f.write("{}")

    def work():
        with open(p) as f:
            json.load(f)
        Path(p).read_bytes()
        fd = os.open(p, os.O_RDONLY)
        os.read(fd, 10)
        os.close(fd)
    rec = record(d, work)
    expect(fs_ops(rec, d) == [], f"reading changes nothing on disk; recorded {shape(fs_ops(rec, d))}")
    expect_clean(rec, "reads")


@check
def a_rename_between_two_links_of_one_file_does_nothing(d):
    """Hard links share one inode: rename(a, b) between them is a no-op, and a write through the temp
    name empties and rewrites the checkpoint itself (issue 18)."""
    p = os.path.join(d, "checkpoint.json")
    tmp = p + ".tmp"

    def save_twice():
        with open(tmp, "w") as f:
            f.write('{"turns": 1}')
        os.link(tmp, p)
        with open(tmp, "w") as f:  # tmp and checkpoint.json are one file
            f.write('{"turns": 2}')
        os.replace(tmp, p)          # POSIX: does nothing, both names stay
    rec = record(d, save_twice)
    expect_clean(rec, "links")
    expect(os.path.exists(tmp), "the kernel kept both names after rename between two links")
    opened = next(op for op in rec.ops if op.kind == "open" and op.index > 2)
    state = m1_after(rec, d, opened.index)
    expect(state.get("checkpoint.json") == b"", f"after the second open, checkpoint.json must be empty "
                                                f"in the model too, got {state.get('checkpoint.json')!r}")
    last = m1_after(rec, d, len(rec.ops) - 1)
    expect(set(last) == {"checkpoint.json", "checkpoint.json.tmp"}, f"both names must stay: {sorted(last)}")


@check
def sync_flags_and_os_sync_are_recorded(d):
    """O_SYNC on an open is recorded (each write durable on return), and os.sync() is an operation."""
    p = os.path.join(d, "checkpoint.json")

    def save():
        fd = os.open(p + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_SYNC)
        os.write(fd, b'{"ok": 1}')
        os.close(fd)
        os.sync()
        os.replace(p + ".tmp", p)
    rec = record(d, save)
    expect_clean(rec, "sync")
    opened = next(op for op in rec.ops if op.kind == "open")
    expect("sync" in opened.flags, f"the O_SYNC flag was dropped: {opened.flags}")
    expect(any(op.kind == "sync" for op in rec.ops), "os.sync() was not recorded")
    power = [s for s in crash_states(rec.ops, rec.initial, d, models=("M3",), initial_dirs=rec.initial_dirs)]
    expect(all(s.files.get("checkpoint.json") in (None, b'{"ok": 1}') for s in power),
           "an O_SYNC write must survive a power cut once it has returned")


@check
def an_o_tmpfile_has_no_name_until_linked(d):
    """os.open(folder, O_TMPFILE) makes no file named after the folder; linkat through /proc names it."""
    if not hasattr(os, "O_TMPFILE"):
        return

    def save():
        fd = os.open(d, os.O_TMPFILE | os.O_WRONLY, 0o644)
        os.write(fd, b"{}")
        folder = os.open(d, os.O_RDONLY)
        os.link(f"/proc/self/fd/{fd}", "checkpoint.json", dst_dir_fd=folder)
        os.close(folder)
        os.close(fd)
    rec = record(d, save)
    expect_clean(rec, "O_TMPFILE")
    names = [set(m1_after(rec, d, i)) for i in range(len(rec.ops))]
    expect(all(n <= {"checkpoint.json"} for n in names), f"a crash state showed a name for the O_TMPFILE file: {names}")
    expect(names[-1] == {"checkpoint.json"} and m1_after(rec, d, len(rec.ops) - 1)["checkpoint.json"] == b"{}",
           "linkat did not give the file its name and bytes")


@check
def fsync_bound_as_a_default_is_recorded(d):
    """`def save(..., _sync=os.fsync)` binds fsync at import; the recorder swaps the default while it runs."""
    p = os.path.join(d, "checkpoint.json")
    namespace = {"__name__": "bound_default", "os": os, "p": p}
    exec("def save(_sync=os.fsync):\n    with open(p, 'w') as f:\n        f.write('{}')\n        f.flush()\n"
         "        _sync(f.fileno())\n", namespace)
    real_default = namespace["save"].__defaults__[0]
    with Recorder(watch=[d], namespaces=[namespace]) as rec:
        namespace["save"]()
    expect(any(op.kind == "fsync" for op in rec.ops), "an fsync bound as a default argument was not recorded")
    expect(namespace["save"].__defaults__[0] is real_default, "the default must be the real fsync again afterwards")


def run_all(names=None):
    """Run every check (or the named ones) in a fresh temp dir each; return the failure messages."""
    failures = []
    for fn in CHECKS:
        if names and fn.__name__ not in names:
            continue
        with tempfile.TemporaryDirectory(prefix="recorder-check-") as d:
            d = os.path.realpath(d)
            try:
                fn(d)
            except Exception as exc:  # noqa: BLE001 - report every failing check, then exit non-zero
                failures.append(f"{fn.__name__}: {type(exc).__name__}: {exc}")
    return failures


def main(argv):
    failures = run_all(argv[1:])
    version = ".".join(map(str, sys.version_info[:3]))
    if failures:
        print(f"recorder_check on Python {version}: {len(failures)} of {len(CHECKS)} checks failed")
        for line in failures:
            print("  " + line)
        return 1
    print(f"recorder_check on Python {version}: all {len(CHECKS)} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
