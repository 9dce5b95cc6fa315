"""One recorded operation (:class:`Op`): what the recorder writes down and the crash models replay.

Its own module so that the crash models (which replay operations) and the recorder (which
writes them down, and replays them to compare with the disk) need not import each other.
"""

from __future__ import annotations

import os
from array import array
from typing import Any, Container, Optional

# Kinds of operation that change what a crash would leave behind (the others only mark time).
FS_KINDS = frozenset({"open", "write", "truncate", "fsync", "sync", "rename", "unlink", "mkdir", "rmdir", "link",
                      "close"})


class Op:
    """One recorded operation. ``path`` is absolute; ``handle`` names one open file (fds get reused).

    A plain class rather than a dataclass: the sandboxed worker imports this module on every start,
    and ``dataclasses`` (with ``inspect``) was the slowest part of that start.
    """

    __slots__ = ("index", "kind", "api", "path", "dest", "handle", "offset", "data", "size", "flags", "is_dir",
                 "payload", "note", "cuts")

    def __init__(self, index: int, kind: str, api: str = "", path: Optional[str] = None, dest: Optional[str] = None,
                 handle: Optional[int] = None, offset: int = 0, data: bytes = b"", size: int = 0,
                 flags: frozenset = frozenset(), is_dir: bool = False, payload: Any = None, note: str = "",
                 cuts: Any = ()):
        self.index, self.kind, self.api, self.path, self.dest = index, kind, api, path, dest
        self.handle, self.offset, self.data, self.size, self.flags = handle, offset, data, size, flags
        self.is_dir, self.payload, self.note = is_dir, payload, note
        # A write joined from several (see join_write): where each but the last of them ended, in ``data``.
        self.cuts = cuts

    def _fields(self) -> tuple:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: Any) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # mutable, like the dataclass it replaces

    def __repr__(self) -> str:
        return "Op(" + ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__) + ")"

    def describe(self) -> str:
        """The operation in a learner's words: ``os.write of 8192 bytes to checkpoint.json.tmp``."""
        name = short_name(self.path)
        if self.kind == "open":
            api = f"{self.api or 'open'}()"
            if "tmpfile" in self.flags:
                return f"{api} made a nameless O_TMPFILE file in {short_name(os.path.dirname(self.path))}"
            if "sync" in self.flags:
                api += " with O_SYNC (each write durable on return)"
            if "create" in self.flags and "existed" not in self.flags:
                return f"{api} created {name}"
            return f"{api} opened {name} for writing" + (" and emptied it" if "trunc" in self.flags else "")
        if self.kind == "write":
            where = f"at offset {self.offset:,}" if self.offset >= 0 else "at its end"
            if self.cuts:
                return (f"{len(self.cuts) + 1:,} {self.api} calls back to back ({len(self.data):,} bytes in all) to {name} "
                        f"{where}")
            return f"{self.api} of {len(self.data):,} bytes to {name} {where}"
        if self.kind == "truncate":
            return f"{self.api} of {name} to {self.size:,} bytes"
        if self.kind == "fsync":
            return f"{self.api} of {'the directory ' if self.is_dir else ''}{name}"
        if self.kind == "sync":
            return f"{self.api}() (every file and folder made durable)"
        if self.kind == "rename":
            return f"{self.api}({name} -> {short_name(self.dest)})"
        if self.kind in ("unlink", "mkdir", "rmdir", "close"):
            return f"{self.api} of {name}"
        if self.kind == "link":
            if "tmpfile" in self.flags:
                return f"{self.api}(the O_TMPFILE file -> {short_name(self.dest)})"
            return f"{self.api}({name} -> {short_name(self.dest)}), a second name for the same file"
        if self.kind == "flush":
            return f"flush of {name}"
        if self.kind == "model_start":
            return f"call {self.payload} to the model starts"
        if self.kind == "model_end":
            return f"call {self.payload[0]} to the model returns"
        if self.kind == "tool_start":
            return f"tool {self.payload[0]!r} starts"
        if self.kind == "tool_end":
            return f"tool {self.payload[0]!r} returns"
        if self.kind == "run_start":
            return "the loop starts"
        if self.kind == "run_end":
            return "the loop returns"
        return self.kind


# Writes handed to the kernel a few bytes at a time (a write per line with buffering=1, a loop of small
# os.write calls, json.dump to an unbuffered file) are joined into one operation when nothing came between
# them (no operation on any file, no mark of the loop such as a model or tool call) and each began where the
# one before ended, through the same open file, in the same process and thread. A correct save made that way
# makes tens of thousands of writes on a long conversation; joined, it is a few operations, like any other.
#
# Why no crash state a verdict depends on is lost (tests/test_joined_writes.py compares the two): the crash
# models rebuild a joined write as the writes it was made of (grader.engine.crash_models). A kill between two
# of them leaves a prefix of the joined bytes that ends where one of them ended: each such end is kept in
# ``cuts`` and made a kill state of its own (M1, in the middle of the joined write, so a level that models no
# torn write, level 4, still has it), beside the tears each write had (page boundaries, and with level 6's
# line cuts every line end: the same cuts, since they fall in the same bytes at the same offsets). Nothing of
# the loop happened between, so each such state is judged against the same marks (window) as the states
# around it. A power cut may keep any version the file passed through since its last fsync: the versions at
# the cuts are kept too (as the bytes they are made of), so the power cut just after the joined write keeps
# every version one between its parts could, and each write stays its own for M4's "one unsynced write
# missing". The one state that goes is M4's between two parts: a write missing while only some of the later
# ones landed, which is the state after the joined write with the same hole, cut shorter (a hole in a JSON
# save breaks it either way; only level 3 models power cuts, and a correct save fsyncs before any of this can
# reach the checkpoint's name). Only writes that cannot change what a crash keeps are joined: not pwrite (its
# own offset), not writes through a file opened with O_SYNC (each is its own fsync, so a power cut between two
# keeps the first), not a copy made inside the kernel, not one whose bytes or position are unknown.
JOINABLE_APIS = frozenset({"write", "writev", "os.write", "os.writev"})


def join_write(last: Optional["Op"], op: "Op", sync_handles: Container = ()) -> bool:
    """Add write ``op`` to ``last`` (the operation just before it, of the same process and thread) when
    it continues it (see above); returns whether it did. The caller says what came between: nothing."""
    if last is None or op.kind != "write" or last.kind != "write" or op.api not in JOINABLE_APIS \
            or op.api != last.api or op.handle is None or op.handle != last.handle or op.path != last.path \
            or op.flags or last.flags or not op.data or op.handle in sync_handles:
        return False
    if (op.size and op.size != len(op.data)) or (last.size and last.size != len(last.data)):
        return False  # bytes the trace did not carry whole
    if op.offset < 0 or last.offset < 0:
        if not (op.offset < 0 and last.offset < 0):
            return False  # (an appending handle's writes both land at the end: one after the other)
    elif op.offset != last.offset + len(last.data):
        return False
    if not last.cuts:
        last.data, last.cuts = bytearray(last.data), array("Q")  # grown in place: a join is not a copy
    last.cuts.append(len(last.data))
    last.data += op.data
    if last.size or op.size:
        last.size = len(last.data)
    return True


def write_parts(op: "Op") -> list:
    """The writes a joined write was made of, each an :class:`Op` of its own (a write not joined: itself)."""
    if not op.cuts:
        return [op]
    ends = [0, *op.cuts, len(op.data)]
    return [Op(op.index, op.kind, api=op.api, path=op.path, dest=op.dest, handle=op.handle,
               offset=op.offset + a if op.offset >= 0 else op.offset, data=bytes(op.data[a:b]),
               size=b - a if op.size else 0, flags=op.flags, is_dir=op.is_dir, payload=op.payload, note=op.note)
            for a, b in zip(ends, ends[1:])]


def short_name(path: Optional[str]) -> str:
    """``checkpoints/checkpoint.json``: a path by its folder and name, as a failure shows it."""
    if path is None:
        return "?"
    parent, name = os.path.split(path)
    if os.path.isabs(path) and os.path.dirname(parent) == os.path.dirname(os.path.dirname(parent)):
        return path  # /tmp/x.json: the folder sits at the root, so the whole path is short and exact
    return f"{os.path.basename(parent)}/{name}" if parent and os.path.basename(parent) else name
