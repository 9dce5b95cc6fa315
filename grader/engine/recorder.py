"""The recorder: every operation with an effect outside the process, in the order it happened.

While a :class:`Recorder` is active it sees each file-system operation at the point where it
reaches the operating system: a ``write`` is recorded when Python hands bytes to the OS (a buffer
flush, ``os.write``, ``sendfile``), not when ``json.dump`` puts them into Python's buffer. That is
the difference between a file that survives a kill and one that is still empty.

How it sees: every public route to a file is patched for the duration (``open``, ``io.open``,
``os.open``/``write``/``fsync``/``replace``/``rename``/..., ``os.sendfile`` for ``shutil``, and
pathlib's accessor on 3.10, which binds ``io.open`` and ``os.replace`` at import). Files are
opened through :class:`RecordingFileIO`, a ``FileIO`` subclass, under Python's own
``BufferedWriter`` and ``TextIOWrapper``, so buffering is exactly what the real ``open`` does.

How it knows what it missed: an audit hook (PEP 578) watches the same operations from inside the
interpreter. An operation that raises an audit event while none of the recorder's wrappers is
running went around them (a name bound before recording began, a C extension); it lands in
:attr:`Recorder.unseen`, and a result built on an incomplete trace says so instead of passing.

A child made with ``os.fork`` inherits the active recorder and its patches; what it records reaches
the parent's recording (see ``Recorder._forward``), so a save made in a forked child is seen.
"""

from __future__ import annotations

import _io
import builtins
import contextlib
import errno
import functools
import io
import os
import pickle
import stat
import struct
import sys
import tempfile
import threading
from typing import Any, Iterator, Optional

from grader.engine.ops import FS_KINDS, Op, join_write, short_name  # noqa: F401 - Op and FS_KINDS: part of this API

_real = {
    "open": _io.open,
    "os.open": os.open, "os.close": os.close, "os.write": os.write, "os.fsync": os.fsync,
    "os.replace": os.replace, "os.rename": os.rename, "os.remove": os.remove, "os.unlink": os.unlink,
    "os.truncate": os.truncate, "os.ftruncate": os.ftruncate, "os.mkdir": os.mkdir, "os.rmdir": os.rmdir,
}
for _name in ("fdatasync", "pwrite", "pwritev", "writev", "sendfile", "copy_file_range", "link", "symlink", "sync", "syncfs"):
    if hasattr(os, _name):
        _real["os." + _name] = getattr(os, _name)

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

# O_TMPFILE is several bits (it includes O_DIRECTORY): a file opened with it has no name until linked.
_O_TMPFILE = getattr(os, "O_TMPFILE", 0)
_O_SYNC = getattr(os, "O_SYNC", 0)
_O_DSYNC = getattr(os, "O_DSYNC", 0)

class _Handle:
    __slots__ = ("id", "path", "writable", "is_dir", "append", "file")

    def __init__(self, id: int, path: str, writable: bool, is_dir: bool, append: bool = False,
                 file: Optional[tuple] = None):
        self.id, self.path, self.writable, self.is_dir, self.append = id, path, writable, is_dir, append
        self.file = file  # (st_dev, st_ino) when opened: which file the descriptor is


_FunctionType = type(lambda: None)
_local = threading.local()
_active: Optional["Recorder"] = None
_hook_installed = False


class _inside:
    """Marks that a recorder wrapper is running, so the audit hook knows the operation is seen.

    Per thread. :func:`grader_work` uses it for a whole thread of the grader's own.
    """

    def __enter__(self):
        _local.depth = getattr(_local, "depth", 0) + 1

    def __exit__(self, *exc):
        _local.depth -= 1


def _abspath(path: Any, dir_fd: Optional[int] = None) -> str:
    path = os.fsdecode(os.fspath(path))
    rec = _active
    if dir_fd is not None and not os.path.isabs(path) and rec is not None and dir_fd in rec._fds:
        path = os.path.join(rec._fds[dir_fd].path, path)
    # (os.getcwd only for a relative name: it raises when the working folder was removed, and an absolute
    # name must still work then)
    full = path if os.path.isabs(path) else os.path.join(os.getcwd(), path)
    if os.path.normpath(full).startswith(("/proc/", "/dev/")):
        # A link the kernel follows into this process (/proc/self/cwd, /proc/self/root, /proc/self/fd/N, /dev/fd/N):
        # the file is named by where it leads, so a folder reached through one is the folder itself (a `..`
        # after the link climbs from there, as in the kernel). A descriptor's own link stays one (see _reopened).
        parent, name = os.path.split(full)
        full = os.path.join(os.path.realpath(parent), name)
    return os.path.abspath(full)


def _reopened(full: str) -> str:
    """The file an open of ``/proc/self/fd/N`` (or ``/proc/<this pid>/fd/N``, ``/dev/fd/N``) opens again.

    The kernel follows such a name to the file behind descriptor N, whatever its name: writes through
    it land in that file (an open with O_TRUNC empties it), so they are recorded under its name, not
    as a file in /proc or /dev that no crash state holds.
    """
    head, _, number = full.rpartition("/")
    if not number.isdigit() or head not in ("/dev/fd", "/proc/self/fd", f"/proc/{os.getpid()}/fd"):
        return full
    fd = int(number)
    rec = _active
    if rec is not None and fd in rec._fds:
        return rec._fds[fd].path
    path = _describe_fd(fd)[0]
    return path if path is not None else full


def _describe_fd(fd: int) -> tuple[Optional[str], bool, bool]:
    """(path, writable, append) of an open descriptor, from the kernel; path None where it cannot say."""
    try:
        path = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None, False, False
    if not path.startswith("/") or path.endswith(" (deleted)"):
        return None, False, False
    writable, append = True, False
    try:
        import fcntl
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        writable = flags & os.O_ACCMODE != os.O_RDONLY
        append = bool(flags & os.O_APPEND)
    except (ImportError, OSError):
        pass
    return path, writable, append


def _ignored(path: str) -> bool:
    """Writes the recorder leaves out: byte-code caches, devices, descriptors it could not name.

    Files in /dev/shm are ordinary files (in memory), not devices: a temp folder there is recorded.
    """
    return (path.startswith(("/dev/", "<fd ")) and not path.startswith("/dev/shm/")) or path.endswith((".pyc", ".pyo")) \
        or "__pycache__" in path


_RECORD = struct.Struct("<I")  # a forwarded record's size, before its pickled body


class _Forwarded(list):
    """A forked child's ``unseen``: what it notes reaches the parent's recording too."""

    def __init__(self, rec: "Recorder", items: list):
        super().__init__(items)
        self._rec = rec

    def append(self, item: Any) -> None:
        super().append(item)
        self._rec._forward(("unseen", item))


def _fork_before() -> None:
    rec = _active
    if rec is not None:
        rec._before_fork()


def _fork_in_child() -> None:
    rec = _active
    if rec is not None and rec._channel is not None:
        rec._in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_fork_before, after_in_child=_fork_in_child)


class Recorder:
    """Record every operation with an effect outside the process, while active.

    ``watch`` lists directories whose starting contents are remembered, so a crash state can be
    rebuilt from what was there before the run. Use as a context manager; one at a time.
    """

    def __init__(self, watch: tuple = (), namespaces: Any = (), patch: bool = True, join_writes: bool = True):
        self._ops: list[Op] = []
        # Writes back to back through one file are one operation (grader.engine.ops.join_write), as the kernel
        # trace joins them under `grade`; off where the operations are sent on before they are complete (the
        # worker's, which the judge joins as it takes them).
        self.join_writes = join_writes
        self._tail: Optional[tuple] = None  # (the last operation, if add() made it, and the thread that did)
        self._sync_handles: set = set()  # handles opened with O_SYNC: each write is its own fsync, never joined
        # patch=False: nothing of os, io, builtins or the learner's modules is replaced, and nothing is
        # recorded here but what add() is given (crashcourse grade's box, where the kernel trace is the
        # account and code must not be able to tell it is watched: grader.grading.worker).
        self.patch = patch
        # Module dicts (a submission's globals) where `from os import replace` and the like may have
        # bound the real functions before recording began: those names are swapped too.
        self.namespaces = list(namespaces)
        self._bound: list[tuple[dict, str, Any]] = []
        self.unseen: list[str] = []
        # C functions the code looked up through ctypes while recording (libc's `write`, say): their calls
        # reach the OS past every patch here, so a file they changed is named with them (compare_with_disk).
        self.c_functions: list[str] = []
        self.watch = [os.path.abspath(os.fspath(w)) for w in watch]
        self.initial: dict[str, bytes] = {}
        self.initial_dirs: set[str] = set()
        self._fds: dict[int, _Handle] = {}
        self._next_handle = 1
        self._just_opened: Optional[int] = None  # the fd os.open returned last (for open(..., opener=))
        self._patches: list[tuple[Any, str, Any]] = []
        self._lock = threading.RLock()
        # A forked child's operations reach this recording through a file both processes hold (see
        # _before_fork): the parent reads them from where it stopped; a child writes them there.
        self._channel: Optional[int] = None
        self._read_at = 0
        self._child_handles: dict = {}  # (a child's pid, its handle) -> the handle here
        self._lineage: tuple = ()  # in a forked child: (pid, first handle of its own) per fork from the recorder's process

    @property
    def ops(self) -> list:
        """Every operation so far, in order: a forked child's included, up to what it has written."""
        self._drain()
        return self._ops

    # -- recording ---------------------------------------------------------------------------
    def add(self, kind: str, **fields: Any) -> Op:
        if getattr(_local, "grader", 0):
            # The grader's own thread (crashcourse check runs the tests in one while this records):
            # its temp folder is no part of the loop's trace, and counting it made the first run's
            # crash states differ from the next run's, by however the two threads happened to race.
            return Op(-1, kind, **fields)
        # A loop may run tools from a thread pool: each index is taken and appended under one lock,
        # so the trace is one order that really happened, with no index given twice.
        with self._lock:
            self._drain()  # what a forked child did first (the parent usually waits for it) comes first
            op = Op(len(self._ops), kind, **fields)
            if self._lineage:
                self._forward(("op", self._lineage, kind, fields))
            if kind == "open" and "sync" in op.flags:
                self._sync_handles.add(op.handle)
            tail, me = self._tail, threading.get_ident()
            if self.join_writes and tail is not None and tail[1] == me and self._ops and self._ops[-1] is tail[0] \
                    and join_write(tail[0], op, self._sync_handles):
                return tail[0]
            self._ops.append(op)
            self._tail = (op, me)
        return op

    def event(self, kind: str, payload: Any = None) -> None:
        """Mark a point in the loop (model and tool calls); crash points fall between operations."""
        self.add(kind, payload=payload)

    def _register(self, fd: int, path: str, writable: bool, append: bool = False) -> _Handle:
        try:
            st = os.fstat(fd)
            is_dir, file = stat.S_ISDIR(st.st_mode), (st.st_dev, st.st_ino)
        except OSError:
            is_dir, file = False, None
        with self._lock:
            handle = _Handle(self._next_handle, path, writable, is_dir, append, file)
            self._next_handle += 1
        self._fds[fd] = handle
        return handle

    def _handle_for(self, fd: int) -> Optional[_Handle]:
        """The open file behind ``fd``; a descriptor opened out of sight is named through /proc if possible."""
        handle = self._fds.get(fd)
        if handle is not None and handle.file is not None:
            try:
                st = os.fstat(fd)
                same = (st.st_dev, st.st_ino) == handle.file
            except OSError:
                same = False
            if not same:
                # The number was closed and given to another file by a route no patch sees (os.closerange, a
                # descriptor received over a socket): it is that file now.
                del self._fds[fd]
                handle = None
        if handle is None and fd > 2:
            # A file opened for reading (by the real open) and then fsynced, a dup()ed descriptor, or
            # one opened before recording began: the kernel still knows its name.
            path, writable, append = _describe_fd(fd)
            if path is None:
                self.unseen.append(f"an operation on file descriptor {fd}, which was opened by a route the recorder "
                                   "does not see")
            else:
                handle = self._register(fd, path, writable, append)
        return handle

    # -- a forked child's operations -------------------------------------------------------------
    # A save made in a child of os.fork() (the child writes, renames and fsyncs, then os._exit; the
    # parent waits) is as real as one made in the parent: the kernel trace under `grade` follows the
    # child, and so must the recorder. The child inherits the active recorder and its patches; each
    # operation it records is also written, whole, to a file the two processes share (a memfd: no
    # name, never on disk; a write there never blocks, unlike a pipe the waiting parent does not read).
    # The parent reads what is there before each operation of its own, so a child's operations come
    # in the order they happened when the parent waited for it, and every reader of ``ops`` sees them.

    def _forward(self, record: tuple) -> None:
        try:
            body = pickle.dumps(record)
        except Exception:  # noqa: BLE001 - a payload that does not pickle (an event's object)
            body = pickle.dumps(("unseen", f"an operation of a forked child ({record[2]}) the grader could not pass on"))
        data = _RECORD.pack(len(body)) + body
        with _inside():
            while data:  # one file, many writers: each record is one write (the kernel keeps them whole)
                data = data[_real["os.write"](self._channel, data):]

    def _drain(self) -> None:
        if self._channel is None or self._lineage:
            return
        with self._lock:
            while True:
                with _inside():
                    head = os.pread(self._channel, _RECORD.size, self._read_at)
                    if len(head) < _RECORD.size:
                        return
                    size = _RECORD.unpack(head)[0]
                    body = os.pread(self._channel, size, self._read_at + _RECORD.size)
                if len(body) < size:
                    return  # a child is still writing it
                self._read_at += _RECORD.size + size
                try:
                    record = pickle.loads(body)
                except Exception:  # noqa: BLE001 - a record torn by a child killed mid-write: what follows cannot be trusted
                    self._read_at = os.fstat(self._channel).st_size
                    note = "a forked child's operations the grader could not read (the child ended part-way through one?)"
                    if note not in self.unseen:
                        self.unseen.append(note)
                    return
                if record[0] == "unseen":
                    if record[1] not in self.unseen:
                        self.unseen.append(record[1])
                    continue
                _, lineage, kind, fields = record
                if fields.get("handle") is not None:
                    fields["handle"] = self._inherited(lineage, fields["handle"])
                self._ops.append(Op(len(self._ops), kind, **fields))

    def _inherited(self, lineage: tuple, handle: int) -> int:
        """A child's handle as this recording numbers it: a file the child inherited keeps its handle;
        one it opened itself (numbered from the count it was forked with) gets a new one here."""
        owner = None
        for pid, first in lineage:
            if handle >= first:
                owner = pid
        if owner is None:
            return handle
        key = (owner, handle)
        if key not in self._child_handles:
            self._child_handles[key] = self._next_handle
            self._next_handle += 1
        return self._child_handles[key]

    def _before_fork(self) -> None:
        if self._channel is not None or not self.patch:
            return  # unpatched (grade's box): the kernel trace follows a child, and no file appears in it
        with _inside():
            if hasattr(os, "memfd_create"):
                self._channel = os.memfd_create("crashcourse-forked-ops", os.MFD_CLOEXEC)
            else:
                path = os.path.join(tempfile.gettempdir(), f".crashcourse-forked-ops-{os.getpid()}-{id(self)}")
                self._channel = _real["os.open"](path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                                                 0o600)
                _real["os.unlink"](path)

    def _in_child(self) -> None:
        self._lock = threading.RLock()  # another thread may have held it at the fork; none runs here
        self._lineage = self._lineage + ((os.getpid(), self._next_handle),)
        self.unseen = _Forwarded(self, self.unseen)

    # -- lifetime ----------------------------------------------------------------------------
    def __enter__(self) -> "Recorder":
        global _active
        if _active is not None:
            raise RuntimeError("a Recorder is already active; they cannot nest")
        _install_audit_hook()
        # Under grade the watched folders are in a box's reach: the files they hold when recording
        # begins are read within the judge's cap on what a replay holds (see crash_models.HELD_LIMIT).
        models = sys.modules.get("grader.engine.crash_models")
        limit = getattr(models, "HELD_LIMIT", None)
        held = 0
        for root in self.watch if self.patch else ():  # the starting files are for compare_with_disk
            if os.path.isdir(root):
                for dirpath, _dirnames, filenames in os.walk(root):
                    self.initial_dirs.add(os.path.abspath(dirpath))
                    for name in filenames:
                        path = os.path.abspath(os.path.join(dirpath, name))
                        with _real["open"](path, "rb") as f:
                            if limit is not None:
                                held += os.fstat(f.fileno()).st_size
                                if held > limit:
                                    raise models.ReplayTooLarge(held, limit)
                            self.initial[path] = f.read()
        # sys.dont_write_bytecode is left as the run had it (a usual run leaves it unset): a .pyc
        # written mid-run (a module the code imports late) is left out of the recording by _ignored,
        # so code that looks at the flag sees what it sees unwatched.
        self._apart = _apart_entry(self.watch) if self.watch else None
        if self._apart is not None:
            _APART.append(self._apart)
        if self.patch:
            self._patch_all()
        _active = self
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._drain()
        finally:
            self._undo()  # whatever happened, nothing of the learner's stays patched
        if not self.patch:
            return  # it recorded nothing by itself: there is no account to compare with the disk
        try:
            self.compare_with_disk()
        except Exception:  # noqa: BLE001 - the replay refused (crash_models.ReplayTooLarge)
            if exc[0] is None:
                raise  # else the error already on its way says it first

    def _undo(self) -> None:
        global _active
        _active = None
        if self._channel is not None and not self._lineage:
            with _inside():
                _real["os.close"](self._channel)
            self._channel = None
        if getattr(self, "_apart", None) is not None:
            _APART.remove(self._apart)
            self._apart = None
        for obj, name, original in reversed(self._patches):
            setattr(obj, name, original)
        self._patches.clear()
        for namespace, name, original in reversed(self._bound):
            if namespace.get(name) is _RECORDING.get(id(original)):
                namespace[name] = original
        self._bound.clear()

    def compare_with_disk(self) -> None:
        """Replay the trace and compare it with the watched directories as the run left them.

        Some routes raise no audit event at all (``os.write`` or ``os.fsync`` bound before recording
        began, a C library writing to a descriptor it was handed). Their bytes still show up on
        disk, so a file whose real contents differ from what the recorded operations rebuild is
        reported as unseen. (A missed ``fsync`` leaves no trace on disk; that one stays invisible.)
        The judge of ``crashcourse grade`` calls it after every call into the sandbox too: there the
        operations come from another process, which could lie about them. Each finding is noted once.
        """
        if not self.watch:
            return
        from grader.engine.crash_models import FileSystem  # late: the sandboxed worker never needs it

        fs = FileSystem(self.initial, self.initial_dirs)
        for op in self._ops:
            fs.apply(op)
        rebuilt = {path: inode.snap() for path, inode in fs.names.items()}
        on_disk: dict[str, tuple] = {}  # path -> (its size, its bytes or None when the size alone differs)
        for root in self.watch:
            for dirpath, _dirs, filenames in os.walk(root):
                for name in filenames:
                    path = os.path.abspath(os.path.join(dirpath, name))
                    if _ignored(path):
                        continue
                    try:
                        with _real["open"](path, "rb") as f:
                            # Read only what the replay says the file holds: a file of another size
                            # differs whatever it holds, and a large (or sparse) file left in the folder
                            # by code the judge does not trust is not read whole after every call.
                            size, replayed = os.fstat(f.fileno()).st_size, rebuilt.get(path)
                            on_disk[path] = (size, f.read(size) if replayed is not None and size == len(replayed)
                                             else None)
                    except OSError:
                        continue
        roots = tuple(root + os.sep for root in self.watch)
        for path in sorted(set(on_disk) | {p for p in rebuilt if p.startswith(roots)}):
            (size, real), replayed = on_disk.get(path, (None, None)), rebuilt.get(path)
            if (real is not None and real == replayed) or _ignored(path):
                continue
            if size is None:
                what = "is gone from the disk, but the recorded operations leave it there"
            elif replayed is None:
                what = f"holds {size} bytes on disk, but no recorded operation created it"
            else:
                what = (f"holds {size} bytes on disk, but the recorded operations rebuild {len(replayed)} "
                        "bytes that differ")
            root = next(r for r in self.watch if path.startswith(r + os.sep))
            line = f"{os.path.relpath(path, root)} {what}: something changed it by a route the recorder does not see"
            if self.c_functions:
                named = ", ".join(f"`{name}`" for name in self.c_functions[:3])
                line += f" (your code called C functions through ctypes while it ran: {named})"
            if line not in self.unseen:
                self.unseen.append(line)

    def _set(self, obj: Any, name: str, value: Any) -> None:
        if hasattr(obj, name):
            self._patches.append((obj, name, getattr(obj, name)))
            setattr(obj, name, value)

    def _patch_all(self) -> None:
        for mod in (builtins, io, _io):
            self._set(mod, "open", recording_open)
        self._set(io, "FileIO", RecordingFileIO)
        for name, fn in _OS_WRAPPERS.items():
            if "os." + name in _real:
                self._set(os, name, fn)
        pathlib = sys.modules.get("pathlib")
        accessor = getattr(pathlib, "_NormalAccessor", None) if pathlib else None
        if accessor is not None:  # Python 3.10 binds these at import; patch the copies too
            self._set(accessor, "open", staticmethod(recording_open))
            for name in ("replace", "rename", "unlink", "mkdir", "rmdir", "link"):
                if name in vars(accessor):
                    self._set(accessor, name, staticmethod(_OS_WRAPPERS[name]))
        for namespace in self.namespaces:
            for name, value in list(namespace.items()):
                wrapper = _RECORDING.get(id(value))
                if wrapper is not None and _RECORDED_REAL[id(value)] is value:
                    self._bound.append((namespace, name, value))
                    namespace[name] = wrapper
                # `def save(state, directory, _sync=os.fsync)` binds the real function as a default
                # when the module is imported: swap it in the defaults too, or that fsync is never seen.
                for fn in [value, *(vars(value).values() if isinstance(value, type) else ())]:
                    fn = getattr(fn, "__func__", fn)
                    # isinstance, not hasattr: an object that makes attributes on demand (pytest.mark)
                    # would answer any name, and warn about each.
                    held = fn.func if isinstance(fn, functools.partial) else None
                    if held is not None and _RECORDED_REAL.get(id(held), None) is held:
                        # functools.partial(os.fsync, ...) keeps the real function where no swap reaches.
                        self.unseen.append(f"{name} holds os.{getattr(held, '__name__', '?')} inside a "
                                           "functools.partial made at import, so the recorder cannot see its calls")
                    if isinstance(fn, _FunctionType) and fn.__module__ == namespace.get("__name__"):
                        self._swap_defaults(fn)

    def _swap_defaults(self, fn: Any) -> None:
        def real(value: Any) -> bool:
            return value is not None and _RECORDED_REAL.get(id(value)) is value
        for cell in fn.__closure__ or ():
            try:
                held = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if real(held):
                self._patches.append((cell, "cell_contents", held))
                cell.cell_contents = _RECORDING[id(held)]
        defaults, kwdefaults = fn.__defaults__, fn.__kwdefaults__
        if defaults and any(real(d) for d in defaults):
            self._patches.append((fn, "__defaults__", defaults))
            fn.__defaults__ = tuple(_RECORDING[id(d)] if real(d) else d for d in defaults)
        if kwdefaults and any(real(d) for d in kwdefaults.values()):
            self._patches.append((fn, "__kwdefaults__", kwdefaults))
            fn.__kwdefaults__ = {k: _RECORDING[id(d)] if real(d) else d
                                 for k, d in kwdefaults.items()}
        shell = sys.modules.get("IPython.core.interactiveshell")
        if shell is not None and hasattr(shell, "io_open"):
            # In a notebook, `open` is IPython's wrapper around io.open bound at import: route it
            # through the recorder too, or a save function written in a notebook cell goes unseen.
            self._set(shell, "io_open", recording_open)


# -- files opened through Python's io stack -------------------------------------------------------

def _mode_flags(mode: str) -> tuple[bool, frozenset]:
    flags = set()
    if "w" in mode:
        flags |= {"create", "trunc"}
    if "x" in mode:
        flags |= {"create", "excl"}
    if "a" in mode:
        flags |= {"create", "append"}
    writable = bool(flags) or "+" in mode
    return writable, frozenset(flags)


def _os_flags(flags: int) -> frozenset:
    out = set()
    if _O_TMPFILE and flags & _O_TMPFILE == _O_TMPFILE:
        out.add("tmpfile")
    if (_O_SYNC and flags & _O_SYNC == _O_SYNC) or (_O_DSYNC and flags & _O_DSYNC == _O_DSYNC):
        out.add("sync")
    if flags & os.O_CREAT:
        out.add("create")
    if flags & os.O_TRUNC:
        out.add("trunc")
    if flags & os.O_APPEND:
        out.add("append")
    if flags & os.O_EXCL:
        out.add("excl")
    return frozenset(out)


class RecordingFileIO(_io.FileIO):
    """A ``FileIO`` that reports each write the moment it reaches the OS."""

    def __init__(self, file: Any, mode: str = "r", closefd: bool = True, opener: Any = None):
        # Whether the name was already there: "emptied the old checkpoint" and "created a new file"
        # teach different things, and only a look before the open can tell them apart.
        existed = _active is not None and not isinstance(file, int) and os.path.lexists(file)
        with _inside():
            super().__init__(file, mode, closefd, opener)
        rec = _active
        self._rec = rec
        self._handle = None
        if rec is None:
            return
        fd = self.fileno()
        writable, flags = _mode_flags(self.mode)
        if isinstance(file, int):
            # os.fdopen(fd) or open(fd): the descriptor was opened earlier (mkstemp, os.open); wrapping
            # it neither creates nor empties anything.
            handle = rec._handle_for(fd)
        elif opener is not None and rec._just_opened == fd:
            handle = rec._fds[fd]  # the opener went through os.open, which recorded the open
        else:
            # FileIO opened the path itself: a new descriptor, whatever an older one with this number was.
            path = _reopened(_abspath(file))
            handle = rec._register(fd, path, writable, "append" in flags)
            if writable and not _ignored(path) and not handle.is_dir:
                rec.add("open", api="open", path=path, handle=handle.id,
                        flags=flags | {"existed"} if existed else flags)
        self._handle = handle

    def write(self, b: Any) -> Optional[int]:
        rec, handle = self._rec, self._handle
        if rec is None or handle is None or rec is not _active or _ignored(handle.path):
            return super().write(b)
        with _inside():
            offset = os.fstat(self.fileno()).st_size if handle.append else self.tell()
            n = super().write(b)
        if n:
            rec.add("write", api="write", path=handle.path, handle=handle.id, offset=offset,
                    data=bytes(memoryview(b)[:n]))
        return n

    def truncate(self, size: Optional[int] = None) -> int:
        with _inside():
            n = super().truncate(size)
        rec, handle = self._rec, self._handle
        if rec is not None and rec is _active and handle is not None and not _ignored(handle.path):
            rec.add("truncate", api="truncate", path=handle.path, handle=handle.id, size=n)
        return n

    def flush(self) -> None:
        super().flush()
        rec, handle = self._rec, self._handle
        if rec is not None and rec is _active and handle is not None and handle.writable and not self.closed \
                and not _ignored(handle.path):
            rec.add("flush", api="flush", path=handle.path, handle=handle.id)

    def close(self) -> None:
        rec, handle = self._rec, self._handle
        if self.closed:
            return
        fd = self.fileno()
        with _inside():
            super().close()
        if rec is not None and rec is _active and handle is not None and rec._fds.get(fd) is handle:
            del rec._fds[fd]
            if handle.writable and not _ignored(handle.path):
                rec.add("close", api="close", path=handle.path, handle=handle.id)


def recording_open(file: Any, mode: str = "r", buffering: int = -1, encoding: Optional[str] = None,
                   errors: Optional[str] = None, newline: Optional[str] = None, closefd: bool = True,
                   opener: Any = None) -> Any:
    """``open`` with Python's own buffering over a :class:`RecordingFileIO` (as ``_pyio.open`` builds it)."""
    if _active is None or not isinstance(mode, str) or not set(mode) & set("wxa+"):
        return _real["open"](file, mode, buffering, encoding, errors, newline, closefd, opener)
    if not isinstance(file, (str, bytes, int)) and not hasattr(file, "__fspath__"):
        return _real["open"](file, mode, buffering, encoding, errors, newline, closefd, opener)
    binary = "b" in mode
    if binary and (encoding is not None or errors is not None or newline is not None):
        return _real["open"](file, mode, buffering, encoding, errors, newline, closefd, opener)
    rawmode = "".join(c for c in mode if c in "rwxa+")
    raw = RecordingFileIO(file, rawmode, closefd, opener=opener)
    try:
        line_buffering = False
        if buffering == 1 or (buffering < 0 and raw.isatty()):
            buffering, line_buffering = -1, True
        if buffering < 0:
            buffering = io.DEFAULT_BUFFER_SIZE
            try:
                blksize = os.fstat(raw.fileno()).st_blksize
                if blksize > 1:
                    buffering = blksize
            except (OSError, AttributeError):
                pass
        if buffering == 0:
            if binary:
                return raw
            raise ValueError("can't have unbuffered text I/O")
        if "+" in mode:
            buffer = io.BufferedRandom(raw, buffering)
        elif set(rawmode) & set("wxa"):
            buffer = io.BufferedWriter(raw, buffering)
        else:
            buffer = io.BufferedReader(raw, buffering)
        if binary:
            return buffer
        if encoding is None and hasattr(io, "text_encoding"):
            encoding = io.text_encoding(None)
        text = io.TextIOWrapper(buffer, encoding, errors, newline, line_buffering)
        text.mode = mode
        return text
    except BaseException:
        raw.close()
        raise


# -- the os module --------------------------------------------------------------------------------

def _recording(name: str):
    def decorate(fn):
        fn.__name__ = name
        fn.__qualname__ = name
        fn.__doc__ = f"os.{name}, recorded by crashcourse while a Recorder is active."
        return fn
    return decorate


@_recording("open")
def _os_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: Optional[int] = None) -> int:
    existed = _active is not None and bool(flags & os.O_CREAT) and os.path.lexists(_abspath(path, dir_fd))
    with _inside():
        fd = _real["os.open"](path, flags, mode, dir_fd=dir_fd)
    rec = _active
    if rec is not None:
        full = _reopened(_abspath(path, dir_fd))
        writable = bool(flags & _WRITE_FLAGS)
        named = _os_flags(flags)
        if "tmpfile" in named:
            # The path names the folder the file will live in; the file itself has no name until
            # linkat gives it one, so it gets a placeholder the crash models never list.
            full = os.path.join(full, f".O_TMPFILE-{rec._next_handle}")
            existed = False
        handle = rec._register(fd, full, writable, bool(flags & os.O_APPEND))
        rec._just_opened = fd
        if writable and not handle.is_dir and not _ignored(full):
            rec.add("open", api="os.open", path=full, handle=handle.id,
                    flags=named | ({"existed"} if existed else set()))
    return fd


@_recording("close")
def _os_close(fd: int) -> None:
    with _inside():
        _real["os.close"](fd)
    rec = _active
    if rec is not None and fd in rec._fds:
        handle = rec._fds.pop(fd)
        if handle.writable and not handle.is_dir and not _ignored(handle.path):
            rec.add("close", api="os.close", path=handle.path, handle=handle.id)


def _fd_write(api: str, fd: int, data: bytes, offset: Optional[int] = None, flags: frozenset = frozenset()) -> None:
    rec = _active
    if rec is None or fd <= 2:
        return
    handle = rec._handle_for(fd)
    if handle is None or _ignored(handle.path):
        return
    rec.add("write", api=api, path=handle.path, handle=handle.id, offset=offset, data=data, flags=flags)


def _position(fd: int, append: bool) -> int:
    with _inside():
        return os.fstat(fd).st_size if append else os.lseek(fd, 0, os.SEEK_CUR)


@_recording("write")
def _os_write(fd: int, data: Any) -> int:
    rec = _active
    handle = rec._handle_for(fd) if rec is not None and fd > 2 else None
    offset = _position(fd, handle.append) if handle is not None else 0
    with _inside():
        n = _real["os.write"](fd, data)
    _fd_write("os.write", fd, bytes(memoryview(data)[:n]), offset)
    return n


@_recording("pwrite")
def _os_pwrite(fd: int, data: Any, offset: int) -> int:
    with _inside():
        n = _real["os.pwrite"](fd, data, offset)
    _fd_write("os.pwrite", fd, bytes(memoryview(data)[:n]), offset)
    return n


# pwritev's flags that make one write durable on return, as a file opened with O_SYNC makes them all.
_RWF_SYNC = getattr(os, "RWF_DSYNC", 0) | getattr(os, "RWF_SYNC", 0)


@_recording("pwritev")
def _os_pwritev(fd: int, buffers: Any, offset: int, flags: int = 0) -> int:
    buffers = [bytes(memoryview(b)) for b in buffers]
    with _inside():
        n = _real["os.pwritev"](fd, buffers, offset, flags)
    _fd_write("os.pwritev", fd, b"".join(buffers)[:n], offset,
              frozenset({"sync"}) if flags & _RWF_SYNC else frozenset())
    return n


@_recording("writev")
def _os_writev(fd: int, buffers: Any) -> int:
    buffers = [bytes(memoryview(b)) for b in buffers]
    rec = _active
    handle = rec._handle_for(fd) if rec is not None and fd > 2 else None
    offset = _position(fd, handle.append) if handle is not None else 0
    with _inside():
        n = _real["os.writev"](fd, buffers)
    _fd_write("os.writev", fd, b"".join(buffers)[:n], offset)
    return n


@_recording("sendfile")
def _os_sendfile(out_fd: int, in_fd: int, offset: Optional[int], count: int, *args: Any, **kwargs: Any) -> int:
    # shutil.copyfile copies with sendfile on Linux: the bytes never pass through a Python write,
    # so read back what was sent, from the source, to know what reached the destination.
    rec = _active
    handle = rec._handle_for(out_fd) if rec is not None and out_fd > 2 else None
    start = _position(out_fd, handle.append) if handle is not None else 0
    with _inside():
        n = _real["os.sendfile"](out_fd, in_fd, offset, count, *args, **kwargs)
        data = os.pread(in_fd, n, offset if offset is not None else os.lseek(in_fd, 0, os.SEEK_CUR) - n) if n else b""
    if n:
        _fd_write("os.sendfile", out_fd, data, start)
    return n


@_recording("copy_file_range")
def _os_copy_file_range(src: int, dst: int, count: int, offset_src: Optional[int] = None,
                        offset_dst: Optional[int] = None) -> int:
    # Like sendfile: the kernel copies, so read back from the source what reached the destination.
    rec = _active
    handle = rec._handle_for(dst) if rec is not None and dst > 2 else None
    start = offset_dst if offset_dst is not None else (_position(dst, handle.append) if handle is not None else 0)
    with _inside():
        n = _real["os.copy_file_range"](src, dst, count, offset_src, offset_dst)
        where = offset_src if offset_src is not None else os.lseek(src, 0, os.SEEK_CUR) - n
        data = os.pread(src, n, where) if n else b""
    if n:
        _fd_write("os.copy_file_range", dst, data, start)
    return n


def _fsync_like(api: str, real: str):
    def fsync(fd: Any) -> None:
        if hasattr(fd, "fileno"):
            fd = fd.fileno()
        with _inside():
            _real[real](fd)
        rec = _active
        if rec is not None:
            handle = rec._handle_for(fd)
            if handle is not None and not _ignored(handle.path):
                rec.add("fsync", api=api, path=handle.path, handle=handle.id, is_dir=handle.is_dir)
    return fsync


def _path_op(kind: str, api: str, real: str, two: bool = False):
    if two:
        def op(src: Any, dst: Any, *, src_dir_fd: Optional[int] = None, dst_dir_fd: Optional[int] = None,
               **kwargs: Any) -> None:
            refuse_across(src, dst, src_dir_fd, dst_dir_fd)
            with _inside():
                _real[real](src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, **kwargs)
            rec = _active
            if rec is not None:
                a, b = _abspath(src, src_dir_fd), _abspath(dst, dst_dir_fd)
                handle, flags = None, frozenset()
                if kind == "link" and a.startswith(("/proc/self/fd/", f"/proc/{os.getpid()}/fd/")):
                    # linkat(fd, AT_SYMLINK_FOLLOW): names an open file (an O_TMPFILE one) by descriptor.
                    fd_text = a.rsplit("/", 1)[1]
                    opened = rec._fds.get(int(fd_text)) if fd_text.isdigit() else None
                    if opened is not None:
                        a, handle = opened.path, opened.id
                        flags = frozenset({"tmpfile"}) if "/.O_TMPFILE-" in a else frozenset()
                if not (_ignored(a) and _ignored(b)):
                    rec.add(kind, api=api, path=a, dest=b, handle=handle, flags=flags)
    else:
        def op(path: Any, *args: Any, dir_fd: Optional[int] = None, **kwargs: Any) -> None:
            with _inside():
                if dir_fd is not None:
                    _real[real](path, *args, dir_fd=dir_fd, **kwargs)
                else:
                    _real[real](path, *args, **kwargs)
            rec = _active
            if rec is not None:
                full = _abspath(path, dir_fd)
                if not _ignored(full):
                    rec.add(kind, api=api, path=full)
    op.__name__ = op.__qualname__ = api.split(".")[-1]
    return op


@_recording("sync")
def _os_sync() -> None:
    with _inside():
        _real["os.sync"]()
    rec = _active
    if rec is not None:
        rec.add("sync", api="os.sync")


@_recording("syncfs")
def _os_syncfs(fd: Any) -> None:
    if hasattr(fd, "fileno"):
        fd = fd.fileno()
    with _inside():
        _real["os.syncfs"](fd)
    rec = _active
    if rec is not None:
        rec.add("sync", api="os.syncfs")


@_recording("truncate")
def _os_truncate(path: Any, length: int) -> None:
    if isinstance(path, int):
        return _os_ftruncate(path, length)
    with _inside():
        _real["os.truncate"](path, length)
    rec = _active
    if rec is not None and not _ignored(_abspath(path)):
        rec.add("truncate", api="os.truncate", path=_abspath(path), size=length)


@_recording("ftruncate")
def _os_ftruncate(fd: int, length: int) -> None:
    with _inside():
        _real["os.ftruncate"](fd, length)
    rec = _active
    if rec is not None:
        handle = rec._handle_for(fd)
        if handle is not None and not _ignored(handle.path):
            rec.add("truncate", api="os.ftruncate", path=handle.path, handle=handle.id, size=length)


_OS_WRAPPERS = {
    "open": _os_open, "close": _os_close, "write": _os_write, "pwrite": _os_pwrite, "pwritev": _os_pwritev,
    "writev": _os_writev,
    "sendfile": _os_sendfile, "copy_file_range": _os_copy_file_range, "fsync": _fsync_like("os.fsync", "os.fsync"),
    "fdatasync": _fsync_like("os.fdatasync", "os.fdatasync"),
    "replace": _path_op("rename", "os.replace", "os.replace", two=True),
    "rename": _path_op("rename", "os.rename", "os.rename", two=True),
    "link": _path_op("link", "os.link", "os.link", two=True),
    "remove": _path_op("unlink", "os.remove", "os.remove"),
    "unlink": _path_op("unlink", "os.unlink", "os.unlink"),
    "mkdir": _path_op("mkdir", "os.mkdir", "os.mkdir"),
    "rmdir": _path_op("rmdir", "os.rmdir", "os.rmdir"),
    "truncate": _os_truncate, "ftruncate": _os_ftruncate, "sync": _os_sync, "syncfs": _os_syncfs,
}


# -- the system temp folder is a file system of its own -------------------------------------------------
#
# On most machines the system temp folder (what tempfile uses: /tmp) is a file system of its own,
# often one in memory, and a file cannot be renamed from one file system into another: the kernel
# refuses with EXDEV ("Invalid cross-device link"), and shutil.move copies the bytes instead. The
# grader's box gives /tmp a file system of its own; where a run's folder and the temp folder share
# one (one disk for everything, or TMPDIR set inside the run's folder), the kit refuses such a rename
# itself, with the kernel's own error. So a loop meets what it would meet on a usual machine, and
# `pytest` and `crashcourse grade` see it do the same thing.

_APART: list = []  # (the temp folder, the folders learner code runs in): one entry per recorder or guard


def _apart_entry(folders: Any) -> tuple:
    # tempfile.tempdir is filled in before any patching: the first gettempdir() writes a probe file.
    return (os.path.realpath(tempfile.gettempdir()), tuple(os.path.realpath(os.fspath(f)) for f in folders))


def _resolved(path: Any, dir_fd: Optional[int]) -> str:
    full = _abspath(path, dir_fd)
    return os.path.join(os.path.realpath(os.path.dirname(full)), os.path.basename(full))


def _under(path: str, roots: Any) -> bool:
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def crosses(src: Any, dst: Any, src_dir_fd: Optional[int] = None, dst_dir_fd: Optional[int] = None) -> bool:
    """Whether moving ``src`` to ``dst`` goes between the system temp folder and a folder learner code
    runs in (either way): two file systems on a usual machine, and in the grader's box."""
    if not _APART:
        return False
    try:
        a, b = _resolved(src, src_dir_fd), _resolved(dst, dst_dir_fd)
    except (TypeError, ValueError, OSError):
        return False
    for temp, folders in list(_APART):
        in_a, in_b = _under(a, folders), _under(b, folders)
        if (in_b and not in_a and _under(a, (temp,))) or (in_a and not in_b and _under(b, (temp,))):
            return True
    return False


def refuse_across(src: Any, dst: Any, src_dir_fd: Optional[int] = None, dst_dir_fd: Optional[int] = None) -> None:
    """Raise the kernel's EXDEV for a rename or link that :func:`crosses` file systems (where the source
    is there at all: a missing one is the kernel's ENOENT, which the real call raises)."""
    if crosses(src, dst, src_dir_fd, dst_dir_fd):
        try:
            there = os.path.lexists(_abspath(src, src_dir_fd))
        except (TypeError, ValueError):
            there = True
        if there:
            # Named as the kernel's own error names them: a pathlib path by its text.
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), _as_named(src), None, _as_named(dst))


def _as_named(path: Any) -> Any:
    return os.fspath(path) if isinstance(path, os.PathLike) else path


def _guarded(name: str, inner: Any) -> Any:
    def guarded(src: Any, dst: Any, *args: Any, **kwargs: Any) -> Any:
        refuse_across(src, dst, kwargs.get("src_dir_fd"), kwargs.get("dst_dir_fd"))
        return inner(src, dst, *args, **kwargs)
    guarded.__name__ = guarded.__qualname__ = name
    guarded.__doc__ = getattr(inner, "__doc__", None)
    guarded.crashcourse_guard = True  # type: ignore[attr-defined]
    return guarded


def _through_os(name: str, *args: Any, **kwargs: Any) -> Any:
    return getattr(os, name)(*args, **kwargs)


@contextlib.contextmanager
def temp_folder_apart(folder: Any) -> Iterator[None]:
    """While learner code runs in ``folder`` without a recorder: the system temp folder is another file
    system (see above), for ``os.rename``, ``os.replace``, ``os.link`` and pathlib over them (a
    :class:`Recorder` does the same for its watched folders)."""
    entry = _apart_entry([folder])
    patches: list = []
    bound: list = []
    if not getattr(os.rename, "crashcourse_guard", False):  # an outer guard already wraps them
        guards = {}
        for name in ("rename", "replace", "link"):
            current = getattr(os, name, None)
            if current is not None:
                patches.append((os, name, current))
                setattr(os, name, _guarded(name, current))
                # A bound name calls whatever os holds at the time: a recorder's wrapper while one records.
                guards[id(current)] = _guarded(name, functools.partial(_through_os, name))
        # `from os import replace` in a learner's file (one the kit's loader imported) binds the real
        # function at import: its name is swapped too, as the recorder swaps it.
        from grader.engine.loader import made_modules  # late: the loader imports nothing of the kit
        for module in made_modules():
            space = vars(module)
            for key, value in list(space.items()):
                guard = guards.get(id(value))
                if guard is not None and any(value is p[2] for p in patches):
                    bound.append((space, key, value))
                    space[key] = guard
        pathlib = sys.modules.get("pathlib")
        accessor = getattr(pathlib, "_NormalAccessor", None) if pathlib else None
        for name in ("rename", "replace", "link"):
            current = vars(accessor).get(name) if accessor is not None else None
            if current is not None:  # Python 3.10 binds these at import
                patches.append((accessor, name, current))
                setattr(accessor, name, staticmethod(_guarded(name, getattr(accessor, name))))
    _APART.append(entry)
    try:
        yield
    finally:
        _APART.remove(entry)
        for space, key, original in reversed(bound):
            if getattr(space.get(key), "crashcourse_guard", False):
                space[key] = original
        for obj, name, original in reversed(patches):
            setattr(obj, name, original)


# The real functions a module may have bound under its own names, by id, with their recording twins.
_RECORDED_REAL = {id(_real["open"]): _real["open"], id(_io.FileIO): _io.FileIO}
_RECORDING = {id(_real["open"]): recording_open, id(_io.FileIO): RecordingFileIO}
for _name, _wrapper in _OS_WRAPPERS.items():
    if "os." + _name in _real:
        _RECORDED_REAL[id(_real["os." + _name])] = _real["os." + _name]
        _RECORDING[id(_real["os." + _name])] = _wrapper


def namespaces_of(fn: Any) -> list:
    """The module globals a loop under test reaches: its own, and those of the modules, functions and
    classes it names (a save_checkpoint imported from a helper module), one level deep. The recorder
    swaps early-bound names like ``from os import replace`` in these."""
    fn = getattr(fn, "__func__", fn)
    fn = getattr(fn, "func", fn)  # functools.partial
    first = getattr(fn, "__globals__", None)
    if not isinstance(first, dict) or _stdlib(first):
        return []
    found = {id(first): first}
    for value in list(first.values()):
        candidates = [value]
        if isinstance(value, type) and not value.__module__ == "builtins":
            candidates = list(vars(value).values())
        elif isinstance(value, type(os)):  # `import helpers`: the helper module's own names
            g = vars(value)
            if id(g) not in found and not _stdlib(g):
                found[id(g)] = g
            continue
        for item in candidates:
            item = getattr(item, "__func__", item)
            g = getattr(item, "__globals__", None)
            if isinstance(g, dict) and id(g) not in found and not _stdlib(g):
                found[id(g)] = g
    return list(found.values())


def _stdlib(namespace: dict) -> bool:
    """True for the standard library's and the kit's own modules: never rebind names there."""
    name = namespace.get("__name__") or ""
    return name.split(".")[0] in sys.stdlib_module_names or name.split(".")[0] == "grader" \
        if hasattr(sys, "stdlib_module_names") else name.split(".")[0] in ("os", "io", "shutil", "tempfile",
                                                                              "pathlib", "json", "grader")


# -- the audit hook: what went around the wrappers ---------------------------------------------------

_WATCHED_EVENTS = {"os.rename", "os.remove", "os.truncate", "os.mkdir", "os.rmdir", "os.link", "os.symlink",
                   "shutil.copyfile", "sqlite3.connect", "mmap.__new__", "os.chmod", "os.utime"}
_PROCESS_EVENTS = {"subprocess.Popen", "os.system", "os.posix_spawn", "os.exec", "os.spawn"}
# Added by grade's judge to the unseen line of a symbolic link the box refused (see grading/stand_in.py):
# the run's PermissionError is that refusal's doing, so the link is told first, as the learner's own
# pytest tells it (grader.engine.explore.Exploration.refused_by_box).
BOX_REFUSED_LINK = ("the grader's box refuses to make links, so there it raised PermissionError and your loop "
                    "stopped")
_WHY_UNSEEN = {
    "mmap.__new__": "a memory map: bytes stored into it reach the file without any write call to record",
    "os.symlink": "a symbolic link: the crash models do not follow links",
    "sqlite3.connect": "a database: SQLite writes through its own C code, out of the recorder's sight",
}
_HARMLESS_EVENTS = {"os.chmod", "os.utime", "shutil.copyfile"}  # seen through the calls they make


def _audit(event: str, args: tuple) -> None:
    rec = _active
    if rec is None or getattr(_local, "depth", 0) or (not rec.patch and event != "os.symlink"):
        return  # unpatched (grade's box), the kernel says what happened: only a link the box refuses is told
    if event == "open":
        path, mode, flags = (args + (None, None, None))[:3]
        if isinstance(path, int) or path is None:
            return
        writes = (isinstance(mode, str) and bool(set(mode) & set("wxa+"))) or (
            mode is None and isinstance(flags, int) and bool(flags & _WRITE_FLAGS))
        if writes:
            full = _abspath(path)
            if not _ignored(full):
                rec.unseen.append(f"a file opened for writing by a route the recorder does not see: {full}")
    elif event == "ctypes.dlsym":
        name = args[1] if len(args) > 1 else None
        if isinstance(name, (str, bytes)):
            name = os.fsdecode(name)[:40]
            if name not in rec.c_functions:
                rec.c_functions.append(name)
    elif event in _PROCESS_EVENTS:
        rec.unseen.append(f"{event}{tuple(str(a) for a in args[:2])} started another program; what it does to the "
                          "disk is out of the recorder's sight")
    elif event in _WATCHED_EVENTS and event not in _HARMLESS_EVENTS:
        first = args[0] if args else ""
        if isinstance(first, (str, bytes, os.PathLike)) and _ignored(_abspath(first)):
            return
        why = _WHY_UNSEEN.get(event, "called by a route the recorder does not see (a name bound before recording "
                                     "started, or a C extension)")
        rec.unseen.append(f"{event}{tuple(str(a) for a in args[:2])}, {why}")


def active() -> Optional[Recorder]:
    """The recorder recording now, or None."""
    return _active


def real_os(name: str) -> Any:
    """``os.<name>`` as it was before any recorder wrapped it: for the grader's own pipes and files."""
    return _real["os." + name]


def wrapper_ids() -> set:
    """The ids of the recorder's own stand-ins for ``os`` functions and ``open``: not a test's patches."""
    return {id(v) for v in _OS_WRAPPERS.values()} | {id(recording_open)}


class _grader_thread(_inside):
    def __enter__(self):
        super().__enter__()
        _local.grader = getattr(_local, "grader", 0) + 1

    def __exit__(self, *exc):
        _local.grader -= 1
        super().__exit__(*exc)


def grader_work() -> "_inside":
    """``with grader_work():`` around what one of the grader's own threads does while a recorder may
    be active elsewhere in the process (``crashcourse check`` runs the tests in a thread while it
    records the learner's loop): the audit hook never blames the recorded code for it, and none of
    its operations enter the trace."""
    return _grader_thread()


def _install_audit_hook() -> None:
    global _hook_installed
    if not _hook_installed:
        sys.addaudithook(_audit)
        _hook_installed = True
