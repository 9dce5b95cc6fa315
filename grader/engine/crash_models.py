"""Crash models: from a recorded trace, every directory a crash could leave behind.

A *crash point* is a boundary between two recorded operations: point ``k`` means the first ``k``
operations happened and the rest did not. A *crash state* is what the checkpoint directory holds
after a crash at that point under one model:

====  ==========================================  ==================================================
id    model                                       what survives
====  ==========================================  ==================================================
M1    the process is killed between operations    everything that reached the OS
M2    one write is torn                           M1, plus a prefix of the write in flight, cut
                                                  where the kernel cuts it: at each 4 KiB page
                                                  boundary of the file offset the write crosses
M3    power is lost                               metadata in order; file data only as far as its
                                                  last fsync (later writes may or may not be there)
M4    unsynced operations are reordered           M3, and the name may point where any operation
                                                  since the last fsync left it; one unsynced write
                                                  may be missing while later ones landed
M5    directory entries need their own fsync      M3, and a create or rename is durable only once
                                                  its directory has been fsynced; a directory made
                                                  during the run is itself such an entry, in its
                                                  parent
====  ==========================================  ==================================================

M3 is the ext4 episode of 2009: the rename reaches the journal while the renamed file's blocks,
never fsynced, do not, so the name survives and points at an empty or short file. It keeps every
metadata operation, in order; losing the latest ones is what M4 and M5 add. Under M4 any fsync is
a barrier (on ext4 one fsync commits the whole journal); under M5 only an fsync of the directory
itself makes an entry in it durable (ALICE found that fsync missing in 6 of the 11 applications
it studied).

The models follow ALICE (Pillai et al., OSDI 2014) and LazyFS in spirit, simplified to what a
checkpoint writer can get wrong. The file system here is a small in-memory model replayed from the
trace; nothing touches the disk.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Container, Iterable, Iterator, Optional

from grader.engine.ops import Op

MODELS = ("M1", "M2", "M3", "M4", "M5")
MODEL_NAMES = {
    "M1": "the process is killed",
    "M2": "the process is killed in the middle of a write",
    "M3": "the power is cut (unsynced file data may be lost)",
    "M4": "the power is cut and unsynced operations land out of order",
    "M5": "the power is cut and directory entries are durable only after the directory is fsynced",
}
BLOCK = 4096
# What a replay may be made to hold beyond the bytes its operations carry: zeros it makes from a
# number alone (a truncate that grows a file, a write far past a file's end) and the versions it
# keeps of files not yet fsynced. Under ``crashcourse grade`` the trace comes from a box the judge
# does not trust: a few sparse 64 MiB files cost the box nothing and would cost the judge all of it
# in memory. Correct loops of every level hold under 2 MiB; the cap is the same under a learner's
# own pytest, in the box and in the judge, so a run is refused alike everywhere. ``crashcourse
# explore``, which crash-tests the user's own program (whose files may be large), lifts it (None).
JUDGE_HELD_LIMIT = 64 * 1024 * 1024
HELD_LIMIT: Optional[int] = JUDGE_HELD_LIMIT


class ReplayTooLarge(Exception):
    """Rebuilding a run's files would hold more than :data:`HELD_LIMIT` bytes: the run is not graded."""

    def __init__(self, held: int, limit: int):
        super().__init__(
            f"a broken run: rebuilding what your code did to files would make the grader hold more than "
            f"{limit // 2**20} MiB ({held // 2**20} MiB so far): files grown with truncate or written far past "
            "their end, a large file changed many times with no fsync between, or large files left in a folder "
            "the grader watches. A checkpoint writer needs none of that, and such a run is not graded")
        self.held, self.limit = held, limit


@dataclass
class CrashState:
    """One directory a crash could leave. ``files`` maps names in the checkpoint directory to bytes.

    ``point`` is the crash point (operations before it happened). For M2, ``torn`` is
    ``(bytes that landed, bytes the write carried)`` of operation ``point``, which was in flight.
    Under M3 to M5 ``files`` holds only the checkpoint file itself: the other names are not rebuilt.
    """

    point: int
    model: str
    files: dict
    torn: Optional[tuple] = None
    note: str = ""
    dirs: tuple = ()   # folders under the checkpoint directory (relative), empty ones included

    @property
    def leftovers(self) -> dict:
        """The files besides checkpoint.json (a temp file a crash left behind), by relative path."""
        return {n: d for n, d in self.files.items() if n != "checkpoint.json"}

    def read(self, name: str) -> Optional[bytes]:
        return self.files.get(name)


class _Versions:
    """The versions a file passed through inside one joined write (see :func:`grader.engine.ops.join_write`):
    ``before`` with the first ``cut`` bytes of ``data`` at ``offset``, for each of ``cuts``. Kept as the
    bytes they are made from, not one copy each: a save written 16 bytes at a time passes through thousands
    of versions, and a correct one fsyncs them all away before anything reads one."""

    __slots__ = ("before", "offset", "data", "cuts")

    def __init__(self, before: bytes, offset: int, data: bytes, cuts: Iterable[int]):
        self.before, self.offset, self.data, self.cuts = before, offset, data, cuts

    def held(self) -> int:
        return len(self.before) + len(self.data)

    def each(self) -> Iterator[bytes]:
        before = memoryview(self.before)
        for cut in self.cuts:
            yield _overlay(before, self.offset, self.data, cut)


def _held(version: object) -> int:
    return version.held() if isinstance(version, _Versions) else len(version)


class _Inode:
    __slots__ = ("data", "synced", "history", "unsynced_writes", "_snap")

    def __init__(self, data: bytes = b"", synced: Optional[bytes] = None):
        self.data = bytearray(data)
        self.synced = bytes(data) if synced is None else synced
        self.history: list = []  # bytes, or the _Versions inside one joined write
        self.unsynced_writes: list[tuple[int, Optional[bytes]]] = []
        self._snap: Optional[bytes] = bytes(data)

    def snap(self) -> bytes:
        if self._snap is None:
            self._snap = bytes(self.data)
        return self._snap

    def changed(self, track: bool) -> None:
        self._snap = None
        if track:
            self.history.append(self.snap())


class FileSystem:
    """A directory tree replayed from recorded operations: names, inodes, and what is durable.

    Names point at inodes, as on Linux: two hard links share one inode (a write through either
    shows under both), ``rename(a, b)`` between two links of one inode changes nothing, and a file
    opened with ``O_TMPFILE`` is an inode with no name until ``linkat`` gives it one. A handle
    opened with ``O_SYNC`` or ``O_DSYNC`` makes each of its writes durable when it returns.
    """

    def __init__(self, initial: dict, initial_dirs: Iterable[str] = (), track_durability: bool = False):
        self.names: dict[str, _Inode] = {path: _Inode(data) for path, data in initial.items()}
        self.dirs: set[str] = set(initial_dirs)
        self.handles: dict[int, _Inode] = {}
        self.sync_handles: set = set()
        self.append_handles: set = set()  # opened with O_APPEND: each write lands at the end, whatever its offset says
        self.track = track_durability
        self.linked_renames: list = []  # renames that did nothing: both names were links to one file
        self.limit = HELD_LIMIT
        self.zeros = 0  # bytes made from a number alone (see HELD_LIMIT), ever
        self.kept = 0  # bytes of the versions kept of files not yet fsynced, now

    def _hold(self, zeros: int = 0, kept: int = 0) -> None:
        self.zeros += zeros
        self.kept += kept
        if self.limit is not None and self.zeros + self.kept > self.limit:
            raise ReplayTooLarge(self.zeros + self.kept, self.limit)

    def _changed(self, inode: "_Inode") -> None:
        inode.changed(self.track)
        if self.track:
            self._hold(kept=len(inode.history[-1]))

    def links(self, inode: _Inode) -> int:
        """How many names point at ``inode`` (its link count)."""
        return sum(1 for v in self.names.values() if v is inode)

    def inode_for(self, op: Op) -> Optional[_Inode]:
        if op.handle is not None and op.handle in self.handles:
            return self.handles[op.handle]
        return self.names.get(op.path) if op.path else None

    def apply(self, op: Op, write_prefix: Optional[int] = None) -> None:
        """Replay one operation (``write_prefix``: only that many bytes of a write landed)."""
        replay = _REPLAY.get(op.kind)
        if replay is not None:
            replay(self, op, write_prefix)

    def _open(self, op: Op, _: Optional[int]) -> None:
        if "sync" in op.flags:
            self.sync_handles.add(op.handle)
        if "append" in op.flags:
            self.append_handles.add(op.handle)
        if "tmpfile" in op.flags:
            self.handles[op.handle] = _Inode(b"", synced=b"")
            return
        inode = self.names.get(op.path)
        if inode is None:
            if "create" not in op.flags:
                inode = _Inode()  # a file we never saw: outside the watched directories
            else:
                inode = _Inode(b"", synced=b"")
            self.names[op.path] = inode
        elif "trunc" in op.flags and inode.data:
            inode.data.clear()
            self._changed(inode)
            if self.track:
                inode.unsynced_writes.append((0, b""))
        self.handles[op.handle] = inode

    def _write(self, op: Op, write_prefix: Optional[int]) -> None:
        inode = self.inode_for(op)
        if inode is None:
            return
        data = op.data if write_prefix is None else op.data[:write_prefix]
        offset = self.offset_of(op, inode)
        end = offset + len(data)
        if len(inode.data) < offset:
            self._hold(zeros=offset - len(inode.data))
            inode.data.extend(b"\0" * (offset - len(inode.data)))
        cuts = [c for c in op.cuts if c < len(data)] if self.track else ()
        if cuts:
            # A joined write is the writes it was made of: the versions between them, and each write for M4.
            versions = _Versions(inode.snap(), offset, data, cuts)
            inode.history.append(versions)
            self._hold(kept=versions.held())
        inode.data[offset:end] = data
        self._changed(inode)
        if op.handle in self.sync_handles or "sync" in op.flags:  # O_SYNC, or pwritev's RWF_DSYNC
            self._synced(inode)
        elif self.track:
            starts = [0, *cuts]
            inode.unsynced_writes.extend((offset + a, bytes(data[a:b])) for a, b in zip(starts, [*cuts, len(data)]))

    def _truncate(self, op: Op, _: Optional[int]) -> None:
        inode = self.inode_for(op)
        if inode is None:
            return
        if op.size < len(inode.data):
            del inode.data[op.size:]
        else:
            self._hold(zeros=op.size - len(inode.data))
            inode.data.extend(b"\0" * (op.size - len(inode.data)))
        self._changed(inode)
        if self.track:
            inode.unsynced_writes.append((op.size, None))  # a resize, replayed in order with the writes

    def _fsync(self, op: Op, _: Optional[int]) -> None:
        if not op.is_dir:
            inode = self.inode_for(op)
            if inode is not None:
                self._synced(inode)

    def _sync(self, op: Op, _: Optional[int]) -> None:
        for inode in {id(v): v for v in [*self.names.values(), *self.handles.values()]}.values():
            self._synced(inode)

    def _rename(self, op: Op, _: Optional[int]) -> None:
        if "exchange" in op.flags and op.path in self.names and op.dest in self.names:
            # renameat2(RENAME_EXCHANGE): the two names trade files in one step
            self.names[op.path], self.names[op.dest] = self.names[op.dest], self.names[op.path]
            return
        if "exchange" in op.flags and (op.path in self.dirs or op.dest in self.dirs):
            # Two folders traded: what each held moves under the other's name. (Taken as a plain rename of the
            # first, the second's files stayed put and the first was forgotten as a folder, so a change made
            # through the traded name was left behind when the folders were traded back.)
            def traded(path: str) -> Optional[str]:
                for top, other in ((op.path, op.dest), (op.dest, op.path)):
                    if path == top or path.startswith(top + os.sep):
                        return other + path[len(top):]
                return None
            names = {traded(n) or n: inode for n, inode in self.names.items()}
            dirs = {traded(d) or d for d in self.dirs}
            self.names.clear()
            self.names.update(names)
            self.dirs.clear()
            self.dirs.update(dirs)
            return
        if op.path in self.names and self.names.get(op.dest) is self.names[op.path]:
            self.linked_renames.append(op)  # POSIX: a rename between two links of one file does nothing
        elif op.path in self.dirs:
            prefix = op.path + os.sep
            for name in [n for n in self.names if n.startswith(prefix)]:
                self.names[op.dest + name[len(op.path):]] = self.names.pop(name)
            self.dirs.discard(op.path)
            self.dirs.add(op.dest)
        elif op.path in self.names:
            self.names[op.dest] = self.names.pop(op.path)

    def _link(self, op: Op, _: Optional[int]) -> None:
        if "tmpfile" in op.flags and op.handle in self.handles:
            self.names[op.dest] = self.handles[op.handle]
        elif op.path in self.names:
            self.names[op.dest] = self.names[op.path]

    def _unlink(self, op: Op, _: Optional[int]) -> None:
        self.names.pop(op.path, None)

    def _mkdir(self, op: Op, _: Optional[int]) -> None:
        self.dirs.add(op.path)

    def _rmdir(self, op: Op, _: Optional[int]) -> None:
        self.dirs.discard(op.path)

    def _close(self, op: Op, _: Optional[int]) -> None:
        self.handles.pop(op.handle, None)
        self.sync_handles.discard(op.handle)
        self.append_handles.discard(op.handle)

    def offset_of(self, op: Op, inode: _Inode) -> int:
        """Where write ``op`` lands in ``inode``: at the end for a handle opened with O_APPEND (and for a
        write whose offset the kernel trace could not know, given as -1), else at its offset."""
        if op.handle in self.append_handles or op.offset < 0:
            return len(inode.data)
        return op.offset

    def _synced(self, inode: _Inode) -> None:
        inode.synced = inode.snap()
        self.kept -= sum(map(_held, inode.history))
        inode.history.clear()
        inode.unsynced_writes.clear()

    def listing(self, directory: str) -> dict:
        """Every file under ``directory``, at any depth, by its path relative to it (``wal/0001.log``)."""
        out = {}
        prefix = directory + os.sep
        for p, inode in self.names.items():
            parent, name = _split(p)
            if parent == directory:
                out[name] = inode.snap()
            elif p.startswith(prefix):
                out[p[len(prefix):]] = inode.snap()
        return out

    def subfolders(self, directory: str) -> tuple:
        """The folders under ``directory`` (relative), so an empty one is rebuilt too."""
        prefix = directory + os.sep
        return tuple(sorted(d[len(prefix):] for d in self.dirs if d.startswith(prefix)))


# How each operation kind changes the file system; the others (model and tool events) change nothing.
_REPLAY: dict = {"open": FileSystem._open, "write": FileSystem._write, "truncate": FileSystem._truncate,
                 "fsync": FileSystem._fsync, "sync": FileSystem._sync, "rename": FileSystem._rename,
                 "link": FileSystem._link, "unlink": FileSystem._unlink, "mkdir": FileSystem._mkdir,
                 "rmdir": FileSystem._rmdir, "close": FileSystem._close}


@functools.lru_cache(maxsize=4096)
def _split(path: str) -> tuple:
    """os.path.split, remembered: listings ask it about the same few paths at every crash point."""
    return os.path.split(path)


def _overlay(before: memoryview, offset: int, data: bytes, cut: int) -> bytes:
    """The file ``before`` with the first ``cut`` bytes of ``data`` written at ``offset`` (one copy)."""
    if offset >= len(before):
        return b"".join((before, b"\0" * (offset - len(before)), memoryview(data)[:cut]))
    end = offset + cut
    return b"".join((before[:offset], memoryview(data)[:cut], before[end:] if end < len(before) else b""))


def _tears(length: int, offset: int = 0) -> list[int]:
    """Where a kill can cut a write of ``length`` bytes at file ``offset``: the kernel copies a write
    into the page cache one page at a time and stops between pages, so at each 4 KiB boundary of the
    file (not of the write) that the write crosses. A write inside one page lands whole or not at all."""
    first = BLOCK - offset % BLOCK
    return list(range(first, length, BLOCK))


def _line_tears(data: bytes, offset: int) -> list[int]:
    """:func:`_tears`, and a cut after each newline before the write's last byte (see ``line_cuts``)."""
    cuts = set(_tears(len(data), offset))
    end = len(data) - 1
    at = data.find(b"\n")
    while -1 < at < end:
        cuts.add(at + 1)
        at = data.find(b"\n", at + 1)
    return sorted(cuts)


def _cuts(tears: list, kills: Iterable[int]) -> Iterator[tuple[int, str]]:
    """``(cut, model)`` in the order the bytes land: each tear of a write (M2) and, in a joined write, each end
    of the writes it was made of (M1: the kill between two of them; a tear there is that state already)."""
    if not kills:
        yield from ((cut, "M2") for cut in tears)
        return
    ends = frozenset(kills)
    for cut in sorted(ends.union(tears)):
        yield cut, "M1" if cut in ends else "M2"


def _data_options(inode: _Inode, holes: bool) -> list[bytes]:
    """What an inode may hold after power loss: its last fsynced data, or any later version."""
    options = [inode.synced]
    for version in inode.history:
        if isinstance(version, _Versions):
            options.extend(version.each())
        else:
            options.append(version)
    if holes and len(inode.unsynced_writes) > 1:
        # One unsynced write missing while the ones after it landed.
        for skip in range(len(inode.unsynced_writes) - 1):
            data = bytearray(inode.synced)
            for i, (offset, chunk) in enumerate(inode.unsynced_writes):
                if i == skip:
                    continue
                if chunk is None:  # a truncate to ``offset`` bytes
                    del data[offset:]
                    data.extend(b"\0" * (offset - len(data)))
                    continue
                if not chunk and offset == 0:
                    data.clear()
                    continue
                if len(data) < offset:
                    data.extend(b"\0" * (offset - len(data)))
                data[offset:offset + len(chunk)] = chunk
            options.append(bytes(data))
    return options


def crash_states(ops: list[Op], initial: dict, directory: str, name: str = "checkpoint.json",
                 models: Iterable[str] = ("M1", "M2"), initial_dirs: Iterable[str] = (),
                 tear_only: Optional[Iterable[str]] = None,
                 points: Optional[Container[int]] = None, line_cuts: bool = False) -> Iterator[CrashState]:
    """Every crash state of ``directory`` under ``models``, in trace order.

    ``initial`` maps absolute paths to the bytes they held when recording began. M1 and M2 rebuild
    the whole directory; M3 to M5 rebuild the file ``name`` in it (its name may point at an older
    inode, and that inode may have lost data that was never fsynced).

    ``tear_only`` names the files whose torn writes (M2) matter to the caller: a checker that reads
    only checkpoint.json gains nothing from the tears of a temp file that is never renamed after
    the crash, and a correct loop writes every byte into temp files.

    ``points``, when given, are the only crash points whose states are wanted (a long run checks a
    sample): the others are replayed but not built.

    ``line_cuts`` adds, to each write's page-boundary cuts, a cut just after every line that ends
    inside it: where a save's first byte falls in its page depends on everything written before it,
    so in some run a page boundary falls right there, and a loader that applies each complete line
    must not apply part of a save.
    """
    tear_only = None if tear_only is None else frozenset(tear_only)
    models = tuple(models)
    unknown = set(models) - set(MODELS)
    if unknown:
        raise ValueError(f"unknown crash model(s) {sorted(unknown)}; choose from {', '.join(MODELS)}")
    directory = os.path.abspath(directory)
    target = os.path.join(directory, name)
    power = [m for m in models if m in ("M3", "M4", "M5")]
    fs = FileSystem(initial, initial_dirs, track_durability=bool(power))

    barriers = _Barriers(fs, directory, target)
    since_any_fsync, since_dir_fsync, new_dirs = barriers.since_any_fsync, barriers.since_dir_fsync, barriers.new_dirs

    def power_states(point: int) -> Iterator[CrashState]:
        seen: set = set()
        for model in power:
            if model == "M3":
                entries = [fs.names.get(target)]
            elif model == "M4":
                entries = since_any_fsync
            else:
                entries = since_dir_fsync + ([None] if new_dirs else [])
            for inode in _unique(entries):
                options = [None] if inode is None else _data_options(inode, holes=model == "M4")
                for data in options:
                    key = (model, data)
                    if key in seen:
                        continue
                    seen.add(key)
                    note = ""
                    if data is None and model == "M5" and new_dirs:
                        note = (f"the folder {os.path.basename(min(new_dirs))}/ itself may be gone: it was made "
                                "during the run and its parent directory was not fsynced after")
                    yield CrashState(point, model, {} if data is None else {name: data}, note=note)

    def names_of(inode: Optional[_Inode]) -> list:
        """The names in ``directory`` that point at ``inode`` (a torn write shows under each)."""
        if inode is None:
            return []
        prefix = directory + os.sep
        return [p[len(prefix):] for p, v in fs.names.items() if v is inode and p.startswith(prefix)]

    wanted = (lambda point: True) if points is None else points.__contains__
    if "M1" in models and wanted(0):
        yield CrashState(0, "M1", fs.listing(directory), dirs=fs.subfolders(directory))
    if wanted(0):
        yield from power_states(0)
    for i, op in enumerate(ops):
        # A write joined from several (grader.engine.ops.join_write) is cut where each of them ended too: a
        # kill between two of them (M1, so a level that models no torn write still sees it), in the middle of
        # the joined one. Each such state differs from the state before the write only in the written file,
        # so one that tear_only says the caller never reads is the same verdict as that state, and is not made.
        kills = op.cuts if "M1" in models and op.kind == "write" else ()
        torn_names = names_of(fs.inode_for(op)) if ("M2" in models or kills) and op.kind == "write" \
            and len(op.data) > 1 and wanted(i) else []
        if tear_only is not None:
            torn_names = [n for n in torn_names if n in tear_only]
        if torn_names:
            # Build each torn file straight from the bytes before the write and a prefix of the
            # write, leaving the replayed file system untouched (no apply-and-undo per tear).
            inode = fs.inode_for(op)
            before = memoryview(inode.snap())
            offset = fs.offset_of(op, inode)
            listing = fs.listing(directory)
            tears = (_tears(len(op.data), offset) if not line_cuts else _line_tears(op.data, offset)) \
                if "M2" in models else []
            for cut, model in _cuts(tears, kills):
                torn = _overlay(before, offset, op.data, cut)
                yield CrashState(i, model, {**listing, **dict.fromkeys(torn_names, torn)}, torn=(cut, len(op.data)),
                                 dirs=fs.subfolders(directory))
        fs.apply(op)
        if power:
            barriers.after(op)
        if not wanted(i + 1):
            continue
        if "M1" in models:
            yield CrashState(i + 1, "M1", fs.listing(directory), dirs=fs.subfolders(directory))
        yield from power_states(i + 1)


class _Barriers:
    """What a power cut may bring back of the checkpoint's name: its value (an inode or None) at the
    last barrier, and each value it took since then (after any fsync, after the folder's fsync), and
    the folders on the way to it made during the run whose entry in their parent has not been
    fsynced yet (under M5 a power cut may lose the folder, and the checkpoint with it). The lists
    are changed in place: crash_states reads them as the run goes."""

    def __init__(self, fs: FileSystem, directory: str, target: str):
        self.fs, self.directory, self.target = fs, directory, target
        start = fs.names.get(target)
        self.since_any_fsync: list = [start]
        self.since_dir_fsync: list = [start]
        self.new_dirs: set = set()
        self.synced_dirs: set = set()  # folders fsynced since a name was last made or moved in them

    def after(self, op: Op) -> None:
        """Move the barriers on past ``op`` (already applied to the file system)."""
        now = self.fs.names.get(self.target)
        kind, directory = op.kind, self.directory
        if kind in ("rename", "link", "open", "unlink") and (op.dest or op.path):
            self.synced_dirs.discard(os.path.dirname(op.dest or op.path))  # a new or changed entry there
        if kind in ("rename", "unlink", "link", "open") and self.target in (op.path, op.dest):
            self.since_any_fsync.append(now)
            self.since_dir_fsync.append(now)
        elif kind == "rename" and op.dest and (op.dest == directory or directory.startswith(op.dest + os.sep)):
            # A folder renamed into place, checkpoint inside: the file's entry is as durable as it was
            # in the folder it came from (fsynced there, or not), and the folder's new name is an
            # entry in its parent, lost to a power cut until the parent is fsynced, like a mkdir's.
            self.since_any_fsync.append(now)
            if op.path in self.synced_dirs:
                self.since_dir_fsync[:] = [now]
            else:
                self.since_dir_fsync.append(now)
            self.new_dirs.add(op.dest)
        elif kind == "sync":  # os.sync(): every file and every directory entry
            self.since_any_fsync[:] = [now]
            self.since_dir_fsync[:] = [now]
            self.new_dirs.clear()
        elif kind == "write" and (op.handle in self.fs.sync_handles or "sync" in op.flags):
            self.since_any_fsync[:] = [now]  # an O_SYNC write is its own fsync
        elif kind == "fsync":
            self._fsynced(op, now)
        elif kind == "mkdir" and (op.path == directory or directory.startswith(op.path + os.sep)):
            self.new_dirs.add(op.path)
        elif kind == "rmdir":
            self.new_dirs.discard(op.path)

    def _fsynced(self, op: Op, now: Optional[_Inode]) -> None:
        self.since_any_fsync[:] = [now]
        if op.is_dir and op.path:
            self.synced_dirs.add(op.path)
        if op.is_dir and op.path == self.directory:
            self.since_dir_fsync[:] = [now]
        if op.is_dir:
            self.new_dirs.difference_update({d for d in self.new_dirs if os.path.dirname(d) == op.path})


def _unique(items: list) -> list:
    out, ids = [], set()
    for item in items:
        if id(item) not in ids:
            ids.add(id(item))
            out.append(item)
    return out
