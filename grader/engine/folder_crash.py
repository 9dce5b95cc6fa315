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
    directory = os.path.abspath(directory)
    power = [m for m in models if m in ("M3", "M4", "M5")]
    # The replay keeps no per-write copies (its own history costs a copy of the file per write);
    # what a power cut may keep is tracked here, bounded: a sample of the versions each file's data
    # passed through since its last fsync (taken at the crash points built), and the bytes the
    # latest unsynced writes replaced (for M4's missing write).
    fs = FileSystem(initial, initial_dirs, track_durability=False)
    versions: dict = {}          # id(inode) -> versions of its data since its last fsync, oldest first
    undo: dict = {}              # id(inode) -> deque of (offset, length, bytes it replaced), latest writes

    existed = set(initial)       # names that held data before the run: rewriting one is in place
    first = {p: fs.names[p] for p in initial if _within(p, directory)}  # the files the run started with
    first_ids = {id(v) for v in first.values()}
    renamed_in: dict = {}        # id(inode) -> index of the rename that gave it a name, since its last fsync
    appended: set = set()        # ids of inodes written at their end since their last fsync
    last_write: dict = {}        # id(inode) -> index of its latest unsynced write
    append_handles: set = set()  # handles opened with O_APPEND
    emptied: set = set()         # ids of inodes truncated during the run (written again from the start)
    touched: set = set()         # ids of the first files written or truncated (only those can differ)
    any_sync = _Names()          # M4
    dir_sync = _Names()          # M5
    new_dirs: dict = {}          # folder made during the run, not yet fsynced in its parent -> op index
    wanted = (lambda k: True) if points is None else points.__contains__

    def rel(path: str) -> str:
        return path[len(directory) + 1:]

    def listing(choose=None, names=None) -> tuple:
        """The folder as ``(files, dirs)``; ``names`` overrides where some names point (None: absent),
        ``choose(inode)`` gives the bytes each inode holds (default: all it was given)."""
        files = {}
        table = fs.names if names is None else {**fs.names, **names}
        for path, inode in table.items():
            if inode is None or not _within(path, directory):
                continue
            files[rel(path)] = inode.snap() if choose is None else choose(inode)
        dirs = tuple(sorted(rel(d) for d in fs.dirs if _within(d, directory)))
        return files, dirs

    def drop_folders(files: dict, dirs: tuple, gone: Iterable[str]) -> tuple:
        gone = [rel(g) for g in gone]

        def inside(name: str) -> bool:
            return any(name == g or name.startswith(g + os.sep) for g in gone)
        return {n: d for n, d in files.items() if not inside(n)}, tuple(d for d in dirs if not inside(d))

    def data_versions(inode) -> list:
        """What ``inode`` may hold after a power cut besides all of it: its fsynced data and the
        versions its unsynced writes passed through (capped at :data:`VERSIONS`, both ends kept)."""
        history = [v for v in versions.get(id(inode), ()) if v is not inode.snap()]
        if len(history) > VERSIONS - 1:
            step = len(history) / (VERSIONS - 1)
            history = [history[int(i * step)] for i in range(VERSIONS - 2)] + [history[-1]]
        return [inode.synced, *history]

    def data_kind(inode, name: str) -> str:
        if id(inode) in renamed_in:
            return "rename-before-data"
        if id(inode) in appended:
            return "append"
        if os.path.join(directory, name) in existed:
            return "in-place"
        return "unsynced-data"

    def power_states(k: int) -> Iterator[FolderState]:
        seen: set = set()
        for state in _power_states(k):
            if (state.model, state.key()) not in seen:
                seen.add((state.model, state.key()))
                yield state

    def _power_states(k: int) -> Iterator[FolderState]:
        unsynced = {}
        for path, inode in fs.names.items():
            if _within(path, directory) and inode.snap() != inode.synced:
                unsynced[id(inode)] = (inode, rel(path))  # its newest name: the one a link or rename gave it
        for model in power:
            files, dirs = listing()
            yield FolderState(k, model, files, dirs, [kill_loss()])  # everything landed: the M1 state
            if unsynced:
                files, dirs = listing(lambda inode: inode.synced)
                yield FolderState(k, model, files, dirs, [
                    Loss("data", name, last_write.get(id(inode)),
                         f"{name} holds only what was fsynced ({len(inode.synced):,} of {len(inode.snap()):,} bytes)",
                         data_kind(inode, name), len(inode.synced))
                    for inode, name in unsynced.values()])
                for inode, name in unsynced.values():
                    for version in data_versions(inode):
                        files, dirs = listing(lambda i, inode=inode, version=version: version if i is inode else i.snap())
                        what = "only what was fsynced" if version is inode.synced else "an older unsynced version"
                        yield FolderState(k, model, files, dirs, [Loss(
                            "data", name, last_write.get(id(inode)),
                            f"{name} holds {what} ({len(version):,} of {len(inode.snap()):,} bytes)",
                            data_kind(inode, name), len(version))])
            if model == "M4":
                for path, seen in any_sync.since.items():
                    for n, earlier in enumerate(seen[:-1]):
                        files, dirs = listing(names={path: earlier})
                        yield FolderState(k, model, files, dirs, [Loss(
                            "entry", rel(path), any_sync.undone(path, n),
                            _entry_words(rel(path), earlier, fs.names.get(path)) + " while a later step did",
                            "reordered", _size(earlier))])
                for inode, name in unsynced.values():
                    writes = list(undo.get(id(inode), ()))
                    for skip in range(len(writes) - 1):
                        data = _without(inode.snap(), *writes[skip])
                        files, dirs = listing(lambda i, inode=inode, data=data: data if i is inode else i.snap())
                        yield FolderState(k, model, files, dirs, [Loss(
                            "hole", name, None,
                            f"{name} lacks its unsynced write #{skip + 1} while later ones landed",
                            "append" if id(inode) in appended else "reordered")])
            if model == "M5":
                lost = {p: seen[0] for p, seen in dir_sync.since.items() if seen[0] is not fs.names.get(p)}
                if lost or new_dirs:
                    files, dirs = listing(names=lost)
                    files, dirs = drop_folders(files, dirs, new_dirs)
                    yield FolderState(k, model, files, dirs, [
                        Loss("entry", rel(p), dir_sync.undone(p, 0), _entry_words(rel(p), lost[p], fs.names.get(p))
                             + " (its folder was not fsynced after)", "dir-not-fsynced", _size(lost[p])) for p in lost]
                        + [Loss("folder", rel(d), i, f"the folder {rel(d)}/ made during the run is gone",
                                "dir-not-fsynced") for d, i in new_dirs.items()])
                    for p in lost:
                        for n, earlier in enumerate(dir_sync.since[p][:-1]):
                            files, dirs = listing(names={p: earlier})
                            yield FolderState(k, model, files, dirs, [Loss(
                                "entry", rel(p), dir_sync.undone(p, n), _entry_words(rel(p), earlier, fs.names.get(p))
                                + " (its folder was not fsynced after)", "dir-not-fsynced", _size(earlier))])

    def kill_loss() -> Loss:
        """A state with every operation so far on disk: broken, it shows a file changed in place, if any."""
        changed = [rel(p) for p, inode in first.items() if id(inode) in touched and fs.names.get(p) is inode
                   and inode.snap() != initial[p]]
        return Loss("kill", changed[0], None, f"{changed[0]} was changed in place", "in-place") if changed \
            else Loss("kill")

    def states_at(k: int) -> Iterator[FolderState]:
        if power:
            for path, inode in fs.names.items():
                if _within(path, directory) and inode.snap() != inode.synced:
                    seen = versions.setdefault(id(inode), [])
                    if not seen or seen[-1] is not inode.snap():
                        seen.append(inode.snap())
                    # Bounded: a file written a million times keeps a sample, and a large one fewer.
                    if len(seen) > max(2, min(4 * VERSIONS, VERSION_BYTES // max(1, len(inode.snap())))):
                        seen[:] = seen[::2]
        if "M1" in models:
            files, dirs = listing()
            yield FolderState(k, "M1", files, dirs, [kill_loss()])
        if power:
            yield from power_states(k)

    if wanted(0):
        yield from states_at(0)
    for i, op in enumerate(ops):
        path_in, dest_in = _within(op.path, directory) or op.path == directory, _within(op.dest, directory)
        if op.kind != "sync" and not (path_in or dest_in):
            if on_op is not None:
                on_op(i, op)
            continue
        if op.kind == "fsync" and (op.path == directory or op.path in fs.dirs):
            op.is_dir = True  # a folder opened without O_DIRECTORY (Node's fs.openSync(dir, "r"))
        inode = fs.inode_for(op)
        if op.kind == "write" and op.offset < 0:  # O_APPEND: the kernel writes at the end
            op.offset = len(inode.data) if inode is not None else 0
        if on_op is not None:
            on_op(i, op)
        if "M2" in models and op.kind == "write" and len(op.data) > 1 and inode is not None and wanted(i):
            before = inode.snap()
            files, dirs = listing()
            names = [rel(p) for p, v in fs.names.items() if v is inode and _within(p, directory)]
            for cut in tears(len(op.data), op.offset):
                torn = bytearray(before)
                if len(torn) < op.offset:
                    torn.extend(b"\0" * (op.offset - len(torn)))
                torn[op.offset:op.offset + cut] = op.data[:cut]
                yield FolderState(i, "M2", {**files, **dict.fromkeys(names, bytes(torn))}, dirs,
                                  [Loss("torn", names[0] if names else "", i, f"{cut:,} of {len(op.data):,} bytes",
                                        "in-place" if id(inode) in first_ids else
                                        "append" if op.offset >= len(before) else "torn-write")],
                                  torn=(cut, len(op.data)))
        before_names = {p: fs.names.get(p) for p in (op.path, op.dest) if p is not None}
        if power and op.kind == "write" and inode is not None:
            replaced = bytes(inode.data[op.offset:op.offset + len(op.data)])
            undo.setdefault(id(inode), collections.deque(maxlen=UNDO)).append((op.offset, len(op.data), replaced))
        if op.kind == "write" and inode is not None and op.offset >= len(inode.data) > 0 \
                and (op.handle in append_handles or id(inode) in first_ids and id(inode) not in emptied):
            appended.add(id(inode))  # a log or journal growing: not a new file being filled
        if op.kind == "open" and "append" in op.flags:
            append_handles.add(op.handle)
        fs.apply(op)
        if op.kind == "truncate" or op.kind == "open" and "trunc" in op.flags:
            emptied.add(id(fs.inode_for(op)))
        if op.kind in ("write", "truncate", "open") and fs.inode_for(op) is not None:
            touched.add(id(fs.inode_for(op)))
        if op.kind == "write" and inode is not None:
            last_write[id(inode)] = i
        if op.kind in ("open", "rename", "link", "unlink"):
            for p, before in before_names.items():
                after = fs.names.get(p)
                if before is not after and _within(p, directory):
                    any_sync.changed(p, before, after, i)
                    dir_sync.changed(p, before, after, i)
            if op.kind in ("rename", "link") and fs.names.get(op.dest) is not None:  # a new name for the data
                moved = fs.names[op.dest]
                if moved.snap() != moved.synced:
                    renamed_in[id(moved)] = i
        elif op.kind == "mkdir" and path_in:
            new_dirs[op.path] = i
        elif op.kind == "rmdir":
            new_dirs.pop(op.path, None)
        elif op.kind == "sync":
            versions.clear()
            undo.clear()
            any_sync.reset()
            dir_sync.reset()
            new_dirs.clear()
            renamed_in.clear()
            appended.clear()
        elif op.kind == "fsync" or (op.kind == "write" and op.handle in fs.sync_handles):
            any_sync.reset()  # under M4 any fsync is a barrier (ext4 commits its whole journal)
            if op.kind == "fsync" and op.is_dir:
                dir_sync.reset([p for p in dir_sync.since if os.path.dirname(p) == op.path])
                for d in [d for d in new_dirs if os.path.dirname(d) == op.path]:
                    del new_dirs[d]
            elif inode is not None:
                versions.pop(id(inode), None)
                undo.pop(id(inode), None)
                renamed_in.pop(id(inode), None)
                appended.discard(id(inode))
                last_write.pop(id(inode), None)
        if wanted(i + 1):
            yield from states_at(i + 1)


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
