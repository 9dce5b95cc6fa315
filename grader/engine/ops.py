"""One recorded operation (:class:`Op`): what the recorder writes down and the crash models replay.

Its own module so that the crash models (which replay operations) and the recorder (which
writes them down, and replays them to compare with the disk) need not import each other.
"""

from __future__ import annotations

import os
from typing import Any, Optional

# Kinds of operation that change what a crash would leave behind (the others only mark time).
FS_KINDS = frozenset({"open", "write", "truncate", "fsync", "sync", "rename", "unlink", "mkdir", "rmdir", "link",
                      "close"})


class Op:
    """One recorded operation. ``path`` is absolute; ``handle`` names one open file (fds get reused).

    A plain class rather than a dataclass: the sandboxed worker imports this module on every start,
    and ``dataclasses`` (with ``inspect``) was the slowest part of that start.
    """

    __slots__ = ("index", "kind", "api", "path", "dest", "handle", "offset", "data", "size", "flags", "is_dir",
                 "payload", "note")

    def __init__(self, index: int, kind: str, api: str = "", path: Optional[str] = None, dest: Optional[str] = None,
                 handle: Optional[int] = None, offset: int = 0, data: bytes = b"", size: int = 0,
                 flags: frozenset = frozenset(), is_dir: bool = False, payload: Any = None, note: str = ""):
        self.index, self.kind, self.api, self.path, self.dest = index, kind, api, path, dest
        self.handle, self.offset, self.data, self.size, self.flags = handle, offset, data, size, flags
        self.is_dir, self.payload, self.note = is_dir, payload, note

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


def short_name(path: Optional[str]) -> str:
    """``checkpoints/checkpoint.json``: a path by its folder and name, as a failure shows it."""
    if path is None:
        return "?"
    parent, name = os.path.split(path)
    if os.path.isabs(path) and os.path.dirname(parent) == os.path.dirname(os.path.dirname(parent)):
        return path  # /tmp/x.json: the folder sits at the root, so the whole path is short and exact
    return f"{os.path.basename(parent)}/{name}" if parent and os.path.basename(parent) else name
