"""Writes handed to the kernel a few bytes at a time are joined into one operation, and no crash state is lost.

A correct save made of many small writes (a write per line with buffering=1, a loop of small os.write calls)
used to count each write as an operation: past 20,000 in one run, `grade` refused the run as broken while the
learner's own pytest passed it. Writes made back to back through one open file (grader.engine.ops.join_write)
are one operation now, in the kernel trace and in the recorder alike, and the crash models rebuild the writes
it was made of. These tests hold both halves: what is joined and what is not (the kernel trace read from
lines strace writes, so no strace is needed), and that the crash states a joined run gives are the states the
same run gave with every write on its own.
"""

from __future__ import annotations

import json
import os
import random

import pytest

from grader.engine import crash_models
from grader.engine.crash_models import crash_states
from grader.engine.ops import Op, join_write, write_parts
from grader.engine.recorder import Recorder
from grader.grading.kernel_trace import MAX_OPS, KernelTrace

FOLDER = "/box/ck"


def _trace(lines: list) -> KernelTrace:
    trace = KernelTrace("/tmp")
    trace.pipe = "pipe:[77]"  # the judge's pipe: a write there is a message to the judge
    for line in lines:
        trace._line(line)  # noqa: SLF001 - strace's lines, as the reader reads them
    assert trace.tampered is None, trace.tampered
    return trace


def _open(fd: int, name: str, flags: str = "O_WRONLY|O_CREAT|O_TRUNC", pid: int = 100) -> str:
    return f'{pid}  openat(AT_FDCWD<{FOLDER}>, "{FOLDER}/{name}", {flags}, 0644) = {fd}<{FOLDER}/{name}>'


def _write(fd: int, name: str, data: str, pid: int = 100, call: str = "write") -> str:
    return f'{pid}  {call}({fd}<{FOLDER}/{name}>, "{data}", {len(data)}) = {len(data)}'


def _writes(trace: KernelTrace) -> list:
    return [op for _, op in trace.ops if op.kind == "write"]


def test_back_to_back_writes_are_one_operation_past_the_cap():
    """30,000 writes of 16 bytes, one save: one operation, cut where each write ended; nothing refused."""
    chunks = [f"{i:015d}," for i in range(30_000)]
    trace = _trace([_open(3, "t.tmp")] + [_write(3, "t.tmp", c) for c in chunks] + [f"100  close(3<{FOLDER}/t.tmp>) = 0"])
    assert trace.refused is None
    [write] = _writes(trace)
    assert bytes(write.data) == "".join(chunks).encode() and write.offset == 0 and write.size == 16 * 30_000
    assert list(write.cuts) == list(range(16, 16 * 30_000, 16))
    assert [bytes(p.data) for p in write_parts(write)] == [c.encode() for c in chunks]
    assert [p.offset for p in write_parts(write)] == list(range(0, 16 * 30_000, 16))
    assert [op.kind for _, op in trace.ops] == ["open", "write", "close"]


def test_the_cap_still_holds_where_writes_are_not_back_to_back():
    """Small writes that take turns between two files stay apart: past MAX_OPS the run is refused, as before."""
    lines = [_open(3, "a"), _open(4, "b")]
    for _ in range(MAX_OPS // 2 + 10):
        lines += [_write(3, "a", "xy"), _write(4, "b", "xy")]
    trace = _trace(lines)
    assert trace.refused is not None and "more than 20,000 file operations" in trace.refused
    assert "back to back" in trace.refused


@pytest.mark.parametrize("between, joined", [
    ([], True),
    # Something the kernel did between them, or something that moves where the next write lands.
    ([f"100  fsync(3<{FOLDER}/t>) = 0"], False),
    ([f"100  lseek(3<{FOLDER}/t>, 0, SEEK_SET) = 0"], False),
    ([f"100  ftruncate(3<{FOLDER}/t>, 0) = 0"], False),
    ([_write(5, "other", "zz")], False),
    # A message to the judge: the loop's marks (a model or tool call) fall between them.
    (['100  write(9<pipe:[77]>, "msg", 3) = 3'], False),
    # Not a file: what the code prints changes no crash state.
    (['100  write(1<pipe:[12]>, "hello", 5) = 5'], True),
    (['100  lseek(3<' + FOLDER + '/t>, 0, SEEK_CUR) = 2'], True),
])
def test_what_comes_between_two_writes_decides_whether_they_join(between, joined):
    trace = _trace([_open(3, "t"), _open(5, "other"), _write(3, "t", "ab")] + between + [_write(3, "t", "cd")])
    writes = [op for op in _writes(trace) if op.path.endswith("/t")]
    if joined:
        assert [(bytes(w.data), list(w.cuts)) for w in writes] == [(b"abcd", [2])]
    else:
        assert [bytes(w.data) for w in writes] == [b"ab", b"cd"] and not any(w.cuts for w in writes)


def test_writes_that_must_stay_apart():
    """pwrite's own offset, two open files of one path, another thread, a file opened with O_SYNC (each write
    is its own fsync): never joined. Writes to an appending file land one after the other: joined."""
    apart = {
        "pwrite": [_open(3, "t"), f'100  pwrite64(3<{FOLDER}/t>, "ab", 2, 0) = 2', f'100  pwrite64(3<{FOLDER}/t>, "cd", 2, 2) = 2'],
        "two opens": [_open(3, "t"), _open(4, "t", "O_WRONLY"), _write(3, "t", "ab"), _write(4, "t", "cd")],
        "two threads": [_open(3, "t"), _write(3, "t", "ab", pid=100), _write(3, "t", "cd", pid=101)],
        "O_SYNC": [_open(3, "t", "O_WRONLY|O_CREAT|O_TRUNC|O_SYNC"), _write(3, "t", "ab"), _write(3, "t", "cd")],
        "writev then write": [_open(3, "t"), f'100  writev(3<{FOLDER}/t>, [{{iov_base="ab", iov_len=2}}], 1) = 2',
                              _write(3, "t", "cd")],
    }
    for what, lines in apart.items():
        writes = _writes(_trace(lines))
        assert len(writes) == 2 and not any(w.cuts for w in writes), what
    appended = _writes(_trace([_open(3, "log", "O_WRONLY|O_CREAT|O_APPEND"), _write(3, "log", "ab"),
                               _write(3, "log", "cd")]))
    assert [(bytes(w.data), w.offset, list(w.cuts)) for w in appended] == [(b"abcd", -1, [2])]


def test_the_recorder_joins_as_the_kernel_does(tmp_path):
    """Under a learner's own pytest the recorder joins the same writes (and keeps them apart where the
    kernel trace would); the worker's recorder, whose operations leave before they are complete, does not."""
    state = {"messages": [f"line {i}" for i in range(200)], "turns": 3}
    path = tmp_path / "t.json"

    def save():
        with open(path, "w", encoding="utf-8", buffering=1) as f:
            json.dump(state, f, indent=2)
        fd = os.open(tmp_path / "b", os.O_WRONLY | os.O_CREAT)
        os.write(fd, b"ab")
        os.fsync(fd)
        os.write(fd, b"cd")
        os.close(fd)
    for join in (True, False):
        with Recorder(watch=[str(tmp_path)], join_writes=join) as rec:
            save()
        writes = [op for op in rec.ops if op.kind == "write" and op.path == str(path)]
        parts = [p for w in writes for p in write_parts(w)]
        assert b"".join(p.data for p in parts) == path.read_bytes()
        assert len(parts) > 200  # a write per line
        assert len(writes) == (1 if join else len(parts))
        assert [op.kind for op in rec.ops if op.path == str(tmp_path / "b")] == ["open", "write", "fsync", "write", "close"]


def _run(rng: random.Random, in_place: bool, sync_each: bool = False) -> list:
    """A made-up run: three saves, each a few small writes (lines among them) then a rename, or written in place."""
    ops, handle = [], 0
    target = f"{FOLDER}/checkpoint.json"
    for save in range(3):
        handle += 1
        path = target if in_place else f"{FOLDER}/checkpoint.json.tmp"
        ops.append(Op(0, "open", api="open", path=path, handle=handle, flags=frozenset({"create", "trunc"})))
        text = json.dumps({"save": save, "lines": ["x" * rng.randint(1, 9) for _ in range(rng.randint(1, 6))]},
                          indent=1).encode()
        at = 0
        while at < len(text):
            n = rng.choice([1, 2, 3, 7, 16, 4096, 5000])
            ops.append(Op(0, "write", api="write", path=path, handle=handle, offset=at, data=text[at:at + n]))
            at += n
            if sync_each and rng.random() < 0.3:
                ops.append(Op(0, "fsync", api="os.fsync", path=path, handle=handle))
        if rng.random() < 0.5:
            ops.append(Op(0, "fsync", api="os.fsync", path=path, handle=handle))
        ops.append(Op(0, "close", api="close", path=path, handle=handle))
        if not in_place:
            ops.append(Op(0, "rename", api="os.replace", path=path, dest=target))
        ops.append(Op(0, "model_start", payload=save))  # a mark of the loop between saves
    return ops


def _joined(ops: list) -> list:
    out: list = []
    for op in ops:
        copy = Op(0, op.kind, api=op.api, path=op.path, dest=op.dest, handle=op.handle, offset=op.offset,
                  data=op.data, flags=op.flags, payload=op.payload)
        if not (out and join_write(out[-1], copy)):
            out.append(copy)
    for i, op in enumerate(out):
        op.index = i
    return out


def _contents(ops: list, models: tuple, **options) -> dict:
    """model -> the set of (files, window) a crash leaves: the window is how many marks came before."""
    marks = [0]
    for op in ops:
        marks.append(marks[-1] + (op.kind == "model_start"))
    out: dict = {}
    for state in crash_states(ops, {}, FOLDER, models=models, **options):
        out.setdefault(state.model, set()).add((tuple(sorted(state.files.items())), marks[state.point]))
    return out


@pytest.mark.parametrize("seed", range(12))
def test_a_joined_run_leaves_the_crash_states_the_writes_left(seed):
    """Kills (M1, M2, with line cuts as on level 6 or not) and power cuts (M3, M5) leave exactly the files,
    within the same marks of the loop, that the run with every write on its own left; M4 keeps every state
    but one unsynced write missing between two parts of a joined write (grader.engine.ops says why no
    verdict rests on it)."""
    rng = random.Random(seed)
    ops = _run(rng, in_place=seed % 2 == 0, sync_each=seed % 3 == 0)
    for i, op in enumerate(ops):
        op.index = i
    joined = _joined(ops)
    assert len(joined) < len(ops) and any(op.cuts for op in joined)
    for line_cuts in (False, True):
        assert _contents(joined, ("M1", "M2"), line_cuts=line_cuts) == _contents(ops, ("M1", "M2"), line_cuts=line_cuts)
    power_joined, power_apart = _contents(joined, ("M3", "M4", "M5")), _contents(ops, ("M3", "M4", "M5"))
    assert power_joined["M3"] == power_apart["M3"] and power_joined["M5"] == power_apart["M5"]
    assert power_joined["M4"] <= power_apart["M4"]
    # What the checkpoint itself can hold is the same, whichever file the caller says it reads.
    only = _contents(joined, ("M1", "M2"), tear_only=("checkpoint.json",))
    every = _contents(ops, ("M1", "M2"))
    assert {dict(f).get("checkpoint.json") for f, _ in only["M1"] | only.get("M2", set())} == \
        {dict(f).get("checkpoint.json") for f, _ in every["M1"] | every.get("M2", set())}


def test_a_power_cut_keeps_the_versions_of_a_joined_write_without_a_copy_each():
    """The replay keeps the versions between a joined write's parts as the bytes they are made of: a save of
    64 KiB in 16-byte writes (4,096 versions, 128 MiB as copies, past the replay's 64 MiB) holds little."""
    data = bytes(range(256)) * 256
    ops = [Op(0, "open", api="open", path=f"{FOLDER}/checkpoint.json", handle=1, flags=frozenset({"create"}))]
    for at in range(0, len(data), 16):
        op = Op(0, "write", api="write", path=f"{FOLDER}/checkpoint.json", handle=1, offset=at, data=data[at:at + 16])
        if not join_write(ops[-1], op):
            ops.append(op)
    ops.append(Op(0, "fsync", api="os.fsync", path=f"{FOLDER}/checkpoint.json", handle=1))
    for i, op in enumerate(ops):
        op.index = i
    assert len(ops) == 3 and len(ops[1].cuts) == len(data) // 16 - 1
    fs = crash_models.FileSystem({}, track_durability=True)
    for op in ops[:2]:
        fs.apply(op)
    assert fs.kept < 4 * len(data) and sum(range(16, len(data) + 1, 16)) > crash_models.JUDGE_HELD_LIMIT
    states = [s for s in crash_states(ops, {}, FOLDER, models=("M3",), points={2}) if s.point == 2]
    assert len({s.files.get("checkpoint.json") for s in states}) == len(data) // 16 + 1  # b"" and each version
