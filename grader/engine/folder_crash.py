"""Every crash state of a whole folder, for any program's trace (``crashcourse explore``).

:func:`grader.engine.crash_models.crash_states` rebuilds one checkpoint file under the power-cut
models, which is all a level's checker reads. A program such as git or SQLite keeps its data in
many files whose agreement matters (a ref naming an object, a database beside its journal), so
here every file under the folder is rebuilt under every model, replayed with the same
:class:`~grader.engine.crash_models.FileSystem`.

Each state says what the crash did to the folder (:class:`Loss`): a file whose unsynced data was
lost, a name whose unsynced rename or create was lost, a folder whose new entries were lost, a
write torn part way. That is what :func:`mistake` reads to name the kind of mistake behind a
broken state, in the vocabulary of the lesson and of the crash-consistency papers.

Which states a power cut may leave (in the spirit of ALICE, Pillai et al., OSDI 2014):

* M1: the folder as it is after the first ``k`` operations.
* M2: M1, plus each write in flight torn at each 4 KiB page boundary of the file it crosses.
* M3: every name as at point ``k`` (metadata reaches the disk in order); each file's data either
  all of it, or only what was fsynced (every file at once: the worst case, and each file on its
  own), or one of the versions its unsynced writes passed through.
* M4: M3, and a name may still point where it pointed at the last fsync or at any step since
  (the rename or create reached the disk after later operations did), and one unsynced write
  of a file may be missing while later ones landed.
* M5: M3, and a create, rename or unlink is durable only once its folder is fsynced: each name
  may still be what it was at the last fsync of its folder (every such name at once, and each on
  its own); a folder made during the run vanishes with its contents until its parent is fsynced.

Memory stays bounded by the folder's size: operations are read from any iterable (a trace read as
it streams) and never kept, and the versions kept of a file's unsynced data are capped.
"""

from __future__ import annotations

import collections
import hashlib
import os
from dataclasses import dataclass, field
from typing import Container, Iterable, Iterator, Optional

from grader.engine.crash_models import BLOCK, MODELS, FileSystem
from grader.engine.ops import Op

# Versions of one file's unsynced data kept as power-cut options (the oldest and newest are kept).
VERSIONS = 6
# ... and at most this many bytes of them (a file of 8 MB keeps 4 versions).
VERSION_BYTES = 32 * 1024 * 1024
# Unsynced writes of one file that M4 may lose one of (the latest ones).
UNDO = 16

# The kinds of mistake a broken state can show, with the lesson's words for each.
KINDS = {
    "in-place": ("a file rewritten in place",
                 "The program emptied or overwrote a file that already held good data, so a crash in the "
                 "middle leaves it half old, half new (or empty). Write the new version to a temp file in "
                 "the same folder, fsync it, then rename it over the old one."),
    "rename-before-data": ("a rename that reaches the disk before the data it names",
                           "The new file was renamed into place without an fsync of its data first. After a "
                           "power cut the rename can be on disk while the file's bytes are not: the name "
                           "points at an empty or short file. fsync the temp file before the rename."),
    "unsynced-data": ("file data never fsynced",
                      "Data this state depends on was never fsynced, so a power cut can lose it while later "
                      "steps that point at it survive. fsync a file before anything refers to it."),
    "dir-not-fsynced": ("a folder never fsynced after a create or rename",
                        "A new name (a create or a rename) lives in its folder, and the folder itself was not "
                        "fsynced afterwards, so a power cut can lose the name even though the file's data was "
                        "fsynced. Open the folder and fsync it after the rename."),
    "append": ("an append a power cut can tear or reorder",
               "Data appended to a file (a log, a journal) was not fsynced before the program relied on it: "
               "after a power cut the file can end early, or a later append can be there while an earlier "
               "one is missing. fsync after each append you count on, and check a record is whole (a "
               "length and a checksum) when reading."),
    "reordered": ("operations that reach the disk out of order",
                  "Between two fsyncs the disk may keep a later step and lose an earlier one. Put an fsync "
                  "between two steps whose order matters."),
    "torn-write": ("a write torn part way",
                   "A kill in the middle of a long write left only its first pages in the file. Never let "
                   "a half-written file carry the name a reader trusts."),
    "not-atomic": ("an update spread over several steps",
                   "A kill between two of the program's steps leaves a state the checker rejects: the "
                   "update is not atomic. Make one final step (a rename) switch from the old state to "
                   "the new one."),
}


@dataclass
class Loss:
    """What a crash did to the folder in one state: ``kind`` (``data``, ``entry``, ``folder``,
    ``hole``, ``torn``, ``kill``), the file (relative) it touched, and the index of the operation
    whose effect is missing where known."""

    kind: str
    name: str = ""
    op: Optional[int] = None
    words: str = ""
    mistake: str = "not-atomic"  # a key of KINDS: the mistake this loss shows when the state is broken
    size: Optional[int] = None    # the bytes ``name`` holds in that state (None: absent, or not said)


@dataclass
class FolderState:
    """One folder a crash could leave: ``files`` (relative path -> bytes), ``dirs`` (relative folders)."""

    point: int
    model: str
    files: dict
    dirs: tuple = ()
    losses: list = field(default_factory=list)
    torn: Optional[tuple] = None
    _key: Optional[str] = None

    def key(self) -> str:
        """A digest of the folder's contents: two states with the same key are the same folder."""
        if self._key is None:
            h = hashlib.blake2b(digest_size=16)
            for name in sorted(self.files):
                data = self.files[name]
                h.update(b"f%d:%s\0%d\0" % (len(name.encode("utf-8", "surrogateescape")),
                                            name.encode("utf-8", "surrogateescape"), len(data)))
                h.update(data)
            for d in sorted(self.dirs):
                h.update(b"d" + d.encode("utf-8", "surrogateescape") + b"\0")
            self._key = h.hexdigest()
        return self._key


def tears(length: int, offset: int) -> list:
    """Where a kill can cut a write of ``length`` bytes at file ``offset``: each 4 KiB page boundary
    of the file it crosses (the kernel copies a write into the page cache one page at a time)."""
    return list(range(BLOCK - offset % BLOCK, length, BLOCK))


class _Names:
    """For each name under the folder, the inodes it pointed at since a barrier (an fsync for M4;
    an fsync of its own folder for M5), oldest first; the last one is where it points now."""

    def __init__(self):
        self.since: dict = {}
        self.by: dict = {}  # name -> the index of the operation that made each value (None: the barrier's)

    def changed(self, name: str, before, after, index: int) -> None:
        seen = self.since.setdefault(name, [before])
        by = self.by.setdefault(name, [None])
        if seen[-1] is not after:
            seen.append(after)
            by.append(index)

    def undone(self, name: str, earlier: int) -> Optional[int]:
        """The operation whose effect is lost when ``name`` is still its value number ``earlier``."""
        return self.by[name][earlier + 1]

    def reset(self, names: Optional[Iterable[str]] = None) -> None:
        if names is None:
            self.since.clear()
            self.by.clear()
        else:
            for n in list(names):
                self.since.pop(n, None)
                self.by.pop(n, None)


def _within(path: Optional[str], directory: str) -> bool:
    return path is not None and path.startswith(directory + os.sep)


def folder_states(ops: Iterable[Op], initial: dict, directory: str, models: Iterable[str] = ("M1",),
                  initial_dirs: Iterable[str] = (), points: Optional[Container[int]] = None,
                  on_op=None) -> Iterator[FolderState]:
    """Every crash state of ``directory`` under ``models``, point by point, as ``ops`` stream past.

    A write at offset -1 (through a descriptor opened with ``O_APPEND``, or one the trace saw only
    as a copy made by ``dup2``, as a shell's ``>`` makes) lands at the end of the file.

    ``initial``: absolute path -> bytes of every file under the folder when the program started;
    ``initial_dirs``: its subfolders (absolute). ``points``: when given, the only crash points
    whose states are built (a long run is sampled); the rest are replayed only. ``on_op(i, op)``
    is called for each operation before its states (the report keeps only what it needs).
    Point ``k`` means the first ``k`` operations happened.
    """
    models = tuple(models)
    unknown = set(models) - set(MODELS)
    if unknown:
        raise ValueError(f"unknown crash model(s) {sorted(unknown)}; choose from {', '.join(MODELS)}")
    replay = _Replay(initial, initial_dirs, os.path.abspath(directory), models)
    wanted = (lambda k: True) if points is None else points.__contains__
    if wanted(0):
        yield from replay.states_at(0)
    for i, op in enumerate(ops):
        if not replay.concerns(op):
            if on_op is not None:
                on_op(i, op)
            continue
        inode = replay.prepare(op)
        if on_op is not None:
            on_op(i, op)
        if "M2" in models and wanted(i):
            yield from replay.torn_states(i, op, inode)
        replay.apply(i, op, inode)
        if wanted(i + 1):
            yield from replay.states_at(i + 1)


class _Replay:
    """The folder replayed one operation at a time, with what a power cut could still undo.

    The replay keeps no per-write copies (its own history costs a copy of the file per write);
    what a power cut may keep is tracked here, bounded: a sample of the versions each file's data
    passed through since its last fsync (taken at the crash points built), and the bytes the
    latest unsynced writes replaced (for M4's missing write). Inodes are keyed by ``id``.
    """

    def __init__(self, initial: dict, initial_dirs: Iterable[str], directory: str, models: tuple):
        self.directory = directory
        self.models = models
        self.power = [m for m in models if m in ("M3", "M4", "M5")]
        self.initial = initial
        self.fs = FileSystem(initial, initial_dirs, track_durability=False)
        self.versions: dict = {}       # inode -> versions of its data since its last fsync, oldest first
        self.undo: dict = {}           # inode -> deque of (offset, length, bytes it replaced), latest writes
        self.existed = set(initial)    # names that held data before the run: rewriting one is in place
        self.first = {p: self.fs.names[p] for p in initial if self.within(p)}  # the files the run started with
        self.first_ids = {id(v) for v in self.first.values()}
        self.renamed_in: dict = {}     # inode -> index of the rename that gave it a name, since its last fsync
        self.appended: set = set()     # inodes written at their end since their last fsync
        self.last_write: dict = {}     # inode -> index of its latest unsynced write
        self.append_handles: set = set()  # handles opened with O_APPEND
        self.emptied: set = set()      # inodes truncated during the run (written again from the start)
        self.touched: set = set()      # the first files written or truncated (only those can differ)
        self.any_sync = _Names()       # M4
        self.dir_sync = _Names()       # M5
        self.new_dirs: dict = {}       # folder made during the run, not yet fsynced in its parent -> op index

    # -- names and listings

    def within(self, path: Optional[str]) -> bool:
        return _within(path, self.directory)

    def rel(self, path: str) -> str:
        return path[len(self.directory) + 1:]

    def listing(self, choose=None, names=None) -> tuple:
        """The folder as ``(files, dirs)``; ``names`` overrides where some names point (None: absent),
        ``choose(inode)`` gives the bytes each inode holds (default: all it was given)."""
        table = self.fs.names if names is None else {**self.fs.names, **names}
        files = {self.rel(path): inode.snap() if choose is None else choose(inode)
                 for path, inode in table.items() if inode is not None and self.within(path)}
        dirs = tuple(sorted(self.rel(d) for d in self.fs.dirs if self.within(d)))
        return files, dirs

    def holding(self, inode, data: bytes) -> tuple:
        """The folder with ``inode`` holding ``data`` and every other file all it was given."""
        return self.listing(lambda i: data if i is inode else i.snap())

    def without_new_folders(self, files: dict, dirs: tuple) -> tuple:
        gone = [self.rel(g) for g in self.new_dirs]

        def inside(name: str) -> bool:
            return any(name == g or name.startswith(g + os.sep) for g in gone)
        return {n: d for n, d in files.items() if not inside(n)}, tuple(d for d in dirs if not inside(d))

    # -- one operation

    def concerns(self, op: Op) -> bool:
        """Whether ``op`` can change the folder (a sync always can)."""
        return op.kind == "sync" or self.within(op.path) or op.path == self.directory or self.within(op.dest)

    def prepare(self, op: Op):
        """Fill in what the trace left implicit; the inode ``op`` acts on, before it runs."""
        if op.kind == "fsync" and (op.path == self.directory or op.path in self.fs.dirs):
            op.is_dir = True  # a folder opened without O_DIRECTORY (Node's fs.openSync(dir, "r"))
        inode = self.fs.inode_for(op)
        if op.kind == "write" and op.offset < 0:  # O_APPEND: the kernel writes at the end
            op.offset = len(inode.data) if inode is not None else 0
        return inode

    def apply(self, i: int, op: Op, inode) -> None:
        """Replay operation number ``i`` and note what a power cut could now undo."""
        before_names = {p: self.fs.names.get(p) for p in (op.path, op.dest) if p is not None}
        if op.kind == "write" and inode is not None:
            self._before_write(op, inode)
        if op.kind == "open" and "append" in op.flags:
            self.append_handles.add(op.handle)
        self.fs.apply(op)
        after = self.fs.inode_for(op)
        if op.kind == "truncate" or op.kind == "open" and "trunc" in op.flags:
            self.emptied.add(id(after))
        if op.kind in ("write", "truncate", "open") and after is not None:
            self.touched.add(id(after))
        if op.kind == "write" and inode is not None:
            self.last_write[id(inode)] = i
        note = _NOTES.get(op.kind)
        if note is not None:
            note(self, i, op, inode, before_names)

    def _before_write(self, op: Op, inode) -> None:
        if self.power:
            replaced = bytes(inode.data[op.offset:op.offset + len(op.data)])
            self.undo.setdefault(id(inode), collections.deque(maxlen=UNDO)).append((op.offset, len(op.data), replaced))
        if op.offset >= len(inode.data) > 0 and (
                op.handle in self.append_handles or id(inode) in self.first_ids and id(inode) not in self.emptied):
            self.appended.add(id(inode))  # a log or journal growing: not a new file being filled

    def _names_changed(self, i: int, op: Op, inode, before_names: dict) -> None:
        for p, before in before_names.items():
            after = self.fs.names.get(p)
            if before is not after and self.within(p):
                self.any_sync.changed(p, before, after, i)
                self.dir_sync.changed(p, before, after, i)
        if op.kind in ("rename", "link") and self.fs.names.get(op.dest) is not None:  # a new name for the data
            moved = self.fs.names[op.dest]
            if moved.snap() != moved.synced:
                self.renamed_in[id(moved)] = i

    def _made_folder(self, i: int, op: Op, inode, before_names: dict) -> None:
        if self.within(op.path) or op.path == self.directory:
            self.new_dirs[op.path] = i

    def _removed_folder(self, i: int, op: Op, inode, before_names: dict) -> None:
        self.new_dirs.pop(op.path, None)

    def _synced_all(self, i: int, op: Op, inode, before_names: dict) -> None:
        for kept in (self.versions, self.undo, self.new_dirs, self.renamed_in, self.appended):
            kept.clear()
        self.any_sync.reset()
        self.dir_sync.reset()

    def _wrote(self, i: int, op: Op, inode, before_names: dict) -> None:
        if op.handle in self.fs.sync_handles:  # O_SYNC: the write is its own fsync
            self._fsynced(i, op, inode, before_names)

    def _fsynced(self, i: int, op: Op, inode, before_names: dict) -> None:
        self.any_sync.reset()  # under M4 any fsync is a barrier (ext4 commits its whole journal)
        if op.kind == "fsync" and op.is_dir:
            self.dir_sync.reset([p for p in self.dir_sync.since if os.path.dirname(p) == op.path])
            for d in [d for d in self.new_dirs if os.path.dirname(d) == op.path]:
                del self.new_dirs[d]
        elif inode is not None:
            for kept in (self.versions, self.undo, self.renamed_in, self.last_write):
                kept.pop(id(inode), None)
            self.appended.discard(id(inode))

    # -- the states at one point

    def states_at(self, k: int) -> Iterator[FolderState]:
        if self.power:
            self._sample_versions()
        if "M1" in self.models:
            files, dirs = self.listing()
            yield FolderState(k, "M1", files, dirs, [self.kill_loss()])
        if self.power:
            seen: set = set()
            for state in self._power_states(k):
                if (state.model, state.key()) not in seen:
                    seen.add((state.model, state.key()))
                    yield state

    def _sample_versions(self) -> None:
        for path, inode in self.fs.names.items():
            if self.within(path) and inode.snap() != inode.synced:
                seen = self.versions.setdefault(id(inode), [])
                if not seen or seen[-1] is not inode.snap():
                    seen.append(inode.snap())
                # Bounded: a file written a million times keeps a sample, and a large one fewer.
                if len(seen) > max(2, min(4 * VERSIONS, VERSION_BYTES // max(1, len(inode.snap())))):
                    seen[:] = seen[::2]

    def kill_loss(self) -> Loss:
        """A state with every operation so far on disk: broken, it shows a file changed in place, if any."""
        changed = [self.rel(p) for p, inode in self.first.items() if id(inode) in self.touched
                   and self.fs.names.get(p) is inode and inode.snap() != self.initial[p]]
        return Loss("kill", changed[0], None, f"{changed[0]} was changed in place", "in-place") if changed \
            else Loss("kill")

    def _power_states(self, k: int) -> Iterator[FolderState]:
        unsynced = {}
        for path, inode in self.fs.names.items():
            if self.within(path) and inode.snap() != inode.synced:
                unsynced[id(inode)] = (inode, self.rel(path))  # its newest name: the one a link or rename gave it
        unsynced = list(unsynced.values())
        for model in self.power:
            files, dirs = self.listing()
            yield FolderState(k, model, files, dirs, [self.kill_loss()])  # everything landed: the M1 state
            yield from self._data_states(k, model, unsynced)
            for states in _MODEL_STATES.get(model, ()):
                yield from states(self, k, model, unsynced)

    # M3 and after: a file's data is all of it, only what was fsynced, or a version it passed through.

    def _data_states(self, k: int, model: str, unsynced: list) -> Iterator[FolderState]:
        if not unsynced:
            return
        files, dirs = self.listing(lambda inode: inode.synced)
        yield FolderState(k, model, files, dirs, [
            self._data_loss(inode, name, inode.synced, "only what was fsynced") for inode, name in unsynced])
        for inode, name in unsynced:
            for version in self._data_versions(inode):
                files, dirs = self.holding(inode, version)
                what = "only what was fsynced" if version is inode.synced else "an older unsynced version"
                yield FolderState(k, model, files, dirs, [self._data_loss(inode, name, version, what)])

    def _data_loss(self, inode, name: str, version: bytes, what: str) -> Loss:
        return Loss("data", name, self.last_write.get(id(inode)),
                    f"{name} holds {what} ({len(version):,} of {len(inode.snap()):,} bytes)",
                    self._data_kind(inode, name), len(version))

    def _data_versions(self, inode) -> list:
        """What ``inode`` may hold after a power cut besides all of it: its fsynced data and the
        versions its unsynced writes passed through (capped at :data:`VERSIONS`, both ends kept)."""
        history = [v for v in self.versions.get(id(inode), ()) if v is not inode.snap()]
        if len(history) > VERSIONS - 1:
            step = len(history) / (VERSIONS - 1)
            history = [history[int(i * step)] for i in range(VERSIONS - 2)] + [history[-1]]
        return [inode.synced, *history]

    def _data_kind(self, inode, name: str) -> str:
        if id(inode) in self.renamed_in:
            return "rename-before-data"
        if id(inode) in self.appended:
            return "append"
        if os.path.join(self.directory, name) in self.existed:
            return "in-place"
        return "unsynced-data"

    # M4: a name still where an earlier step left it; one unsynced write missing while later ones landed.

    def _reordered_names(self, k: int, model: str, unsynced: list) -> Iterator[FolderState]:
        for path, seen in self.any_sync.since.items():
            for n, earlier in enumerate(seen[:-1]):
                files, dirs = self.listing(names={path: earlier})
                yield FolderState(k, model, files, dirs, [Loss(
                    "entry", self.rel(path), self.any_sync.undone(path, n),
                    _entry_words(self.rel(path), earlier, self.fs.names.get(path)) + " while a later step did",
                    "reordered", _size(earlier))])

    def _missing_writes(self, k: int, model: str, unsynced: list) -> Iterator[FolderState]:
        for inode, name in unsynced:
            writes = list(self.undo.get(id(inode), ()))
            for skip in range(len(writes) - 1):
                files, dirs = self.holding(inode, _without(inode.snap(), *writes[skip]))
                yield FolderState(k, model, files, dirs, [Loss(
                    "hole", name, None, f"{name} lacks its unsynced write #{skip + 1} while later ones landed",
                    "append" if id(inode) in self.appended else "reordered")])

    # M5: a name as at its folder's last fsync; a folder made during the run gone with its contents.

    def _unsynced_folders(self, k: int, model: str, unsynced: list) -> Iterator[FolderState]:
        lost = {p: seen[0] for p, seen in self.dir_sync.since.items() if seen[0] is not self.fs.names.get(p)}
        if not (lost or self.new_dirs):
            return
        files, dirs = self.without_new_folders(*self.listing(names=lost))
        yield FolderState(k, model, files, dirs, [self._entry_loss(p, 0, lost[p]) for p in lost] + [
            Loss("folder", self.rel(d), i, f"the folder {self.rel(d)}/ made during the run is gone", "dir-not-fsynced")
            for d, i in self.new_dirs.items()])
        for p in lost:
            for n, earlier in enumerate(self.dir_sync.since[p][:-1]):
                files, dirs = self.listing(names={p: earlier})
                yield FolderState(k, model, files, dirs, [self._entry_loss(p, n, earlier)])

    def _entry_loss(self, path: str, n: int, earlier) -> Loss:
        return Loss("entry", self.rel(path), self.dir_sync.undone(path, n),
                    _entry_words(self.rel(path), earlier, self.fs.names.get(path))
                    + " (its folder was not fsynced after)", "dir-not-fsynced", _size(earlier))

    # M2: a write in flight cut at each page boundary.

    def torn_states(self, i: int, op: Op, inode) -> Iterator[FolderState]:
        if op.kind != "write" or len(op.data) <= 1 or inode is None:
            return
        before = inode.snap()
        files, dirs = self.listing()
        names = [self.rel(p) for p, v in self.fs.names.items() if v is inode and self.within(p)]
        mistake = "in-place" if id(inode) in self.first_ids else "append" if op.offset >= len(before) else "torn-write"
        for cut in tears(len(op.data), op.offset):
            torn = bytearray(before)
            if len(torn) < op.offset:
                torn.extend(b"\0" * (op.offset - len(torn)))
            torn[op.offset:op.offset + cut] = op.data[:cut]
            yield FolderState(i, "M2", {**files, **dict.fromkeys(names, bytes(torn))}, dirs,
                              [Loss("torn", names[0] if names else "", i, f"{cut:,} of {len(op.data):,} bytes",
                                    mistake)], torn=(cut, len(op.data)))


# What each kind of operation changes in what a power cut could undo, after it is replayed.
_NOTES = {
    "open": _Replay._names_changed, "rename": _Replay._names_changed, "link": _Replay._names_changed,
    "unlink": _Replay._names_changed, "mkdir": _Replay._made_folder, "rmdir": _Replay._removed_folder,
    "sync": _Replay._synced_all, "fsync": _Replay._fsynced, "write": _Replay._wrote,
}

# The states each power-cut model adds to M3's (a file's data: all, the fsynced part, or a version).
_MODEL_STATES = {
    "M4": (_Replay._reordered_names, _Replay._missing_writes),
    "M5": (_Replay._unsynced_folders,),
}


def _size(inode) -> Optional[int]:
    return None if inode is None else len(inode.snap())


def _entry_words(name: str, earlier, now) -> str:
    """What a lost directory entry looks like: a name back, gone, or naming its older file."""
    if earlier is None:
        return f"{name} is absent: its create or rename never reached the disk"
    if now is None:
        return f"{name} is back: its unlink or rename away never reached the disk"
    return f"{name} names its older file: the rename over it never reached the disk"


def _without(data: bytes, offset: int, length: int, replaced: bytes) -> bytes:
    """``data`` without one write of ``length`` bytes at ``offset``: the bytes it replaced are back, and
    what it added beyond the file's end then reads as zeros (a later write made the file longer)."""
    out = bytearray(data)
    end = min(offset + length, len(out))
    if offset < end:
        out[offset:end] = (replaced + b"\0" * length)[:end - offset]
    return bytes(out)


# When one state lost several things (every file's unsynced data at once), the mistake named is
# the first of these it shows: the one most likely to be what the checker tripped on.
PRIORITY = ("rename-before-data", "dir-not-fsynced", "append", "unsynced-data", "in-place", "reordered",
            "torn-write", "not-atomic")


def mistake(losses: list) -> str:
    """The kind of mistake (a key of :data:`KINDS`) a broken state with these ``losses`` shows."""
    kinds = {loss.mistake for loss in losses}
    return next((k for k in PRIORITY if k in kinds), "not-atomic")
