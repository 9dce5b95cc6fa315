"""What the kernel saw the worker do to files, from ``strace`` outside the worker's Python.

The recorder (:mod:`grader.engine.recorder`) runs inside the worker, in the same interpreter as the
submission, so a submission can edit what it wrote down (``Recorder.ops``) before it reaches the
judge. This module takes a second account that the submission cannot edit: ``strace -f
--seccomp-bpf`` starts the worker, and writes every file-system system call it makes (with every
byte of every write) to a file that has no name anywhere (created and unlinked by the judge;
strace reaches it through the descriptor it was handed, and the worker closes that descriptor
before any of the submission's code runs).

After each message from the worker that carries recorded operations, the judge waits until the
trace has caught up with that message (the kernel saw the worker write every byte of it to the
judge's pipe), takes the system calls made before it, and compares them with the recorded
operations on the watched folders (:func:`compare`). Where they differ, the run's verdict is not
trusted: the difference is added to the recorder's list of things it could not see, so the
tests built on that run fail with the reason. Where they agree, each recorded write takes the
kernel's bytes (the worker sends only the sizes of its writes in the watched folders), so the crash
states are built from the kernel's account; the recorder only says where in the loop each
operation happened (save point A or B, which tool).

What the tracer costs, and why it is outside the worker's Python but inside today's box: see
``benchmarks/README.md`` and the README's section on why a submission cannot grade itself. A
submission that kills its tracer gains nothing: with ``--seccomp-bpf`` every traced system call of
an untraced process fails (ENOSYS), so it can no longer open a file or answer the judge.
"""

from __future__ import annotations

import codecs
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Iterable, Optional

from grader.engine.ops import Op
from grader.grading.wire import ELIDED

# The calls that change files (and the few that say where a relative path points, or where the
# next write lands). Reads are not traced: they change nothing a crash could leave behind.
CALLS = ("open,openat,creat,write,pwrite64,writev,pwritev,pwritev2,sendfile,copy_file_range,lseek,"
         "rename,renameat,renameat2,link,linkat,unlink,unlinkat,rmdir,mkdir,mkdirat,fsync,fdatasync,"
         "ftruncate,truncate,close,chdir,fchdir,sync,syncfs,io_uring_setup")
# io_uring would change files with no system call of its own (and no line in the trace): the
# tracer makes it fail, as a kernel without it would, and Python's own file code never uses it.
REFUSED = "io_uring_setup:error=EPERM"
# Compared with the recorder: the operations that decide what a crash leaves behind.
COMPARED = frozenset({"open", "write", "truncate", "fsync", "sync", "rename", "link", "unlink", "mkdir", "rmdir"})
# Bytes of one write strace prints: every byte of any write the box allows (its file-size cap), so the
# crash states are built from what the kernel was asked to write, not from what the worker reported.
# Under ``-x`` printable ASCII (a JSON save) is printed as it is, about one character per byte; the
# ``\\xHH`` form of every byte (``-xx``) cost four, and at four characters a byte, printing whole
# saves cost more than the rest of grading (see benchmarks/README.md). A longer write (only a
# box with a larger cap could make one) is compared by its first bytes, its size and its offset.
STRING_LIMIT = 64 * 1024 * 1024
MISMATCH = "the recorded file operations do not match what the kernel saw"

# Kept call by call when a worker's tracer injects faults (grader.grading.faults): failed ones too.
KEPT = frozenset({"open", "openat", "write", "pwrite64", "writev", "pwritev", "pwritev2", "fsync", "fdatasync",
                  "close", "rename", "renameat", "renameat2", "sync", "syncfs"})
_ERRNO = re.compile(r"= -1 (E[A-Z0-9]+) ")


@dataclass
class Call:
    """One system call of a worker, failed or not, as a fault-injection check reads it.

    ``ordinal``: how many calls of this name the thread ``tid`` had made, this one included: the
    count strace's ``inject=...:when=N`` goes by. ``wire``: bytes the worker had written to the
    judge's pipe before it. ``path``: the file it names; ``flags``: the flags that file was
    opened with (an ``open`` gives its own). ``at_cwd``: a path relative to the working folder,
    not to a descriptor (``dir_fd``).
    """
    tid: str
    name: str
    ordinal: int
    wire: int
    ret: int
    errno: Optional[str]
    injected: bool
    path: str
    flags: str
    at_cwd: bool = True


_LINE = re.compile(r"^(\d+) +(.*)$")
_WRITES = ("write", "writev", "pwrite64", "pwritev", "pwritev2", "sendfile", "copy_file_range")
_TARGET = re.compile(r"(\d+)<([^>]*)>")  # a call's first argument under -y: its descriptor and what it names
# A file with no name (O_TMPFILE, or unlinked while open) reads `3</dir/#1234>(deleted)`.
_CALL = re.compile(r"^(\w+)\((.*)\) += (-?\d+|\?)(?:<([^>]*)>(?:\(deleted\))?)?(?: .*)?$")
_RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>(.*)$")
_UNFINISHED = " <unfinished ...>"
_WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND")

_problem: Optional[str] = None
_checked = False


def _unescape(text: str) -> bytes:
    """strace's escaped bytes (``-x``: printable ASCII as it is, ``\\n``, ``\\"`` and octal escapes, and a
    string holding any other byte wholly as ``\\xHH``). These are Python's own byte escapes, so
    ``codecs.escape_decode`` reads them at C speed: a save of a few hundred KB is one long line."""
    return codecs.escape_decode(text.encode("latin-1", "replace"))[0]


def problem() -> Optional[str]:
    """Why the kernel trace cannot be taken here (no strace, or ptrace refused), or None if it can.

    Checked once per process, by tracing ``true``: a container without ptrace (some Docker
    profiles, gVisor) fails here, and grading then runs on the recorder alone.
    """
    global _problem, _checked
    if _checked:
        return _problem
    _checked = True
    if os.environ.get("CRASHCOURSE_KERNEL_TRACE", "") == "0":
        _problem = "turned off with CRASHCOURSE_KERNEL_TRACE=0"
    elif shutil.which("strace") is None:
        _problem = "strace is not installed (Debian: apt-get install -y strace)"
    else:
        try:
            probe = subprocess.run(["strace", "-f", "--seccomp-bpf", "-e", "trace=close", "-e", "signal=none",
                                    "-o", "/dev/null", "true"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as exc:
            _problem = f"strace could not be started ({exc})"
        else:
            if probe.returncode != 0:
                first = (probe.stderr.strip().splitlines() or ["no message"])[0]
                _problem = f"strace cannot trace here ({first}); ptrace may be refused in this container"
    return _problem


class KernelTrace:
    """One worker's strace output, read as it grows, turned into :class:`~grader.engine.ops.Op`.

    Use: ``KernelTrace(folder)``, :meth:`wrap` the worker's command (``pass_fds`` += :attr:`pass_fds`),
    :meth:`started` with the judge's end of the pipe the worker writes to, then :meth:`check`
    after each message.
    """

    def __init__(self, scratch: str, keep_calls: bool = False):
        # A file with no name anywhere: a memfd (or, without one, a file unlinked at once); strace
        # reaches it through the descriptor it is handed, the worker closes that descriptor.
        self.name = f"crashcourse-kernel-trace-{os.getpid()}"
        if hasattr(os, "memfd_create"):
            self.fd = os.memfd_create(self.name, os.MFD_CLOEXEC)
        else:
            path = os.path.join(scratch, "." + self.name)
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            os.unlink(path)
        self.read_at = 0
        self.tail = b""
        self.parts: list = []  # pieces of a line longer than one read, after self.tail
        self.pipe: Optional[str] = None  # the judge's pipe as strace names it: pipe:[inode]
        self.wire = 0  # bytes the kernel saw the worker write to the judge's pipe
        self.ops: list[tuple[int, Op]] = []  # (wire bytes before it, the operation)
        self.pending: dict[str, str] = {}  # pid -> the first half of an unfinished call
        self.cwd = "/"  # one for all: threads share it, and a child starts with its parent's
        self.fds: dict[int, list] = {}  # fd -> [path, writable, handle, position or None, is_dir]
        self.next_handle = 1
        self.tampered: Optional[str] = None
        self.proc: Any = None
        self.first_pid: Optional[str] = None  # the worker: strace's first tracee
        self.worker_ended = False  # strace wrote how the worker ended (it does unless it was killed first)
        # With keep_calls: every call in KEPT, in order (see Call), and what the worker's own thread is.
        self.calls: Optional[list[Call]] = [] if keep_calls else None
        self.counts: dict[tuple, int] = {}
        self.open_flags: dict[int, tuple] = {}  # fd -> (path, open flags), for the kept calls
        self.main_tid: Optional[str] = None  # the thread that answers the judge (the first to write to its pipe)

    @property
    def pass_fds(self) -> tuple:
        return (self.fd,)

    def wrap(self, command: list, cwd: str, inject: Iterable[str] = ()) -> list:
        """``command`` started under strace, writing to this trace.

        ``inject``: more of strace's ``inject=`` expressions (``fsync:error=EIO:when=3``), the faults a
        check makes the kernel report (:mod:`grader.grading.faults`).
        """
        self.cwd = os.path.realpath(cwd)
        return ["strace", "-f", "--seccomp-bpf", "-qq", "-y", "-x", "-s", str(STRING_LIMIT), "-e", "signal=none",
                "-e", "trace=" + CALLS, "-e", "inject=" + REFUSED] + [w for spec in inject for w in ("-e", "inject=" + spec)] \
            + ["-o", f"/proc/self/fd/{self.fd}", "--"] + list(command)

    def started(self, judge_end: int, proc: Any) -> None:
        self.pipe = f"pipe:[{os.fstat(judge_end).st_ino}]"
        self.proc = proc

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    # -- reading -------------------------------------------------------------------------------
    def catch_up(self, wire_bytes: int, patience: float = 10.0) -> bool:
        """Read the trace until it shows ``wire_bytes`` written to the judge's pipe (False: it never did)."""
        wait = 0.0002
        deadline = time.monotonic() + patience
        while True:
            self._read()
            if self.wire >= wire_bytes or self.tampered:
                return self.wire >= wire_bytes
            if time.monotonic() > deadline or (self.proc is not None and self.proc.poll() is not None
                                               and not self._more()):
                return False
            time.sleep(wait)
            wait = min(wait * 2, 0.02)

    def _more(self) -> bool:
        return self.fd >= 0 and os.fstat(self.fd).st_size > self.read_at

    def _read(self) -> None:
        while self.fd >= 0:
            chunk = os.pread(self.fd, 1 << 22, self.read_at)
            if not chunk:
                return
            self.read_at += len(chunk)
            if b"\n" not in chunk:
                # Part of one long line (a write of megabytes): kept in pieces, joined once it ends,
                # rather than copied again with every chunk.
                self.parts.append(chunk)
                continue
            if self.parts:
                chunk = b"".join(self.parts) + chunk
                self.parts = []
            lines = (self.tail + chunk).split(b"\n")
            self.tail = lines.pop()
            for line in lines:
                self._line(line.decode("latin-1"))

    def _line(self, line: str) -> None:
        m = _LINE.match(line)
        if not m:
            self._tamper(f"a line the tracer would never write: {line[:80]!r}")
            return
        pid, rest = m.groups()
        if self.first_pid is None:
            self.first_pid = pid
        if rest.startswith(("+++ ", "--- ")):
            if pid == self.first_pid and rest.startswith("+++ "):
                self.worker_ended = True
            return
        if rest.endswith(_UNFINISHED):
            self.pending[pid] = rest[: -len(_UNFINISHED)]
            return
        r = _RESUMED.match(rest)
        if r:
            rest = self.pending.pop(pid, r.group(1) + "(") + r.group(2)
        c = _CALL.match(rest)
        if not c:
            self._tamper(f"a line the tracer would never write: {line[:80]!r}")
            return
        name, args, ret, ret_path = c.groups()
        if self.calls is not None and name in KEPT:
            try:
                # A write's bytes (megabytes, maybe) are not split into arguments: its target is enough.
                target = _TARGET.match(args) if name in _WRITES else None
                self._keep(pid, name, [target.group(0)] if target else _split(args), ret, ret_path, rest)
            except (ValueError, IndexError, KeyError) as exc:
                self._tamper(f"a {name} line that could not be read ({exc})")
        if ret == "?" or int(ret) < 0:
            return
        if name in _WRITES and name != "copy_file_range":
            # A write to a pipe or a terminal (the judge's pipe, what the code prints) leaves nothing on
            # disk: its bytes, up to megabytes of them, are not even split into arguments; its target
            # is all _call needs (to count the judge's pipe).
            target = _TARGET.match(args)
            if target is not None and not os.fsdecode(_unescape(target.group(2))).startswith("/"):
                self._call(pid, name, [target.group(0)], int(ret), ret_path)
                return
        try:
            self._call(pid, name, _split(args), int(ret), ret_path)
        except (ValueError, IndexError, KeyError) as exc:
            self._tamper(f"a {name} line that could not be read ({exc})")

    def _tamper(self, what: str) -> None:
        if self.tampered is None:
            self.tampered = what

    def _keep(self, pid: str, name: str, args: list, ret: str, ret_path: Optional[str], line: str) -> None:
        """Note one call of KEPT, failed or not, with its count for this thread (see :class:`Call`)."""
        key = (pid, name)
        self.counts[key] = ordinal = self.counts.get(key, 0) + 1
        value = -1 if ret == "?" else int(ret)
        failed = _ERRNO.search(line) if value < 0 else None
        path, flags, at_cwd = "", "", True
        if name in ("open", "openat"):
            flags = args[2 if name == "openat" else 1]
            at_cwd = name == "open" or args[0].startswith("AT_FDCWD") or _string(args[1])[0].startswith(b"/")
            path = os.fsdecode(_unescape(ret_path)) if ret_path and value >= 0 else \
                self._path(pid, args[1], args[0]) if name == "openat" else self._path(pid, args[0])
            if value >= 0:
                self.open_flags[value] = (path, flags)
        elif name == "sync":
            pass  # it names no file
        elif name.startswith("rename"):
            path = self._path(pid, args[0]) if name == "rename" else self._path(pid, args[1], args[0])
        else:
            fd, path = _annotation(args[0])
            if path == self.pipe and name == "write" and self.main_tid is None:
                self.main_tid = pid
            known = self.open_flags.get(fd)
            flags = known[1] if known is not None and known[0] == path else ""
            if name == "close" and value >= 0:
                self.open_flags.pop(fd, None)
        self.calls.append(Call(pid, name, ordinal, self.wire, value, failed.group(1) if failed else None,
                               line.rstrip().endswith("(INJECTED)"), path, flags, at_cwd))

    # -- one system call -----------------------------------------------------------------------
    def _path(self, pid: str, arg: str, dirfd: Optional[str] = None) -> str:
        path = os.fsdecode(_string(arg)[0])
        if not os.path.isabs(path):
            base = _annotation(dirfd)[1] if dirfd is not None and "<" in dirfd else None
            path = os.path.join(base or self.cwd, path)
        return os.path.normpath(path)

    def _emit(self, kind: str, **fields: Any) -> None:
        self.ops.append((self.wire, Op(-1, kind, **fields)))

    def _call(self, pid: str, name: str, args: list, ret: int, ret_path: Optional[str]) -> None:
        if name in ("open", "openat", "creat"):
            path = os.fsdecode(_unescape(ret_path)) if ret_path else ""
            if self.name in path:
                # The trace has no name: only a descriptor's link under /proc/<pid>/fd reopens it.
                self._tamper("it opened the trace itself through /proc")
            flags = "O_WRONLY|O_CREAT|O_TRUNC" if name == "creat" else args[2 if name == "openat" else 1]
            writable = any(f in flags for f in _WRITE_FLAGS)
            handle = self.next_handle
            self.next_handle += 1
            is_dir = "O_DIRECTORY" in flags
            self.fds[ret] = [path, writable, handle, None if "O_APPEND" in flags else 0, is_dir]
            if writable and not is_dir:
                named = {"O_CREAT": "create", "O_TRUNC": "trunc", "O_APPEND": "append", "O_EXCL": "excl",
                         "O_SYNC": "sync", "O_DSYNC": "sync", "O_TMPFILE": "tmpfile"}
                self._emit("open", api=name, path=path, handle=handle,
                           flags=frozenset(v for k, v in named.items() if k in flags))
            return
        if name in _WRITES:
            target = args[2] if name == "copy_file_range" else args[0]
            fd, path = _annotation(target)
            if path == self.pipe:
                self.wire += ret
                return
            if self.name in path:
                self._tamper("it wrote into the kernel trace itself")
            if not path.startswith("/") or path.startswith("/dev/"):
                return  # a pipe, a socket, a terminal: nothing a crash leaves on disk
            if name in ("write", "pwrite64"):
                data, cut = _string(args[1])
            elif name in ("writev", "pwritev", "pwritev2"):
                data, cut = _iovecs(args[1])
            else:
                data, cut = b"", True
            data = data[:ret]
            entry = self.fds.get(fd)
            if name.startswith("pwrite"):
                offset = int(args[-2] if name == "pwritev2" else args[-1])
            else:
                offset = entry[3] if entry is not None and entry[3] is not None else -1
                if entry is not None and entry[3] is not None:
                    entry[3] += ret
            self._emit("write", api=name, path=path, handle=entry[2] if entry else None, offset=offset,
                       data=data, size=ret, flags=frozenset({"cut"}) if cut else frozenset())
            return
        if name == "lseek":
            entry = self.fds.get(_annotation(args[0])[0])
            if entry is not None and entry[3] is not None:
                entry[3] = ret
            return
        if name in ("fsync", "fdatasync"):
            fd, path = _annotation(args[0])
            entry = self.fds.get(fd)
            is_dir = entry[4] if entry is not None and entry[0] == path else os.path.isdir(path)
            self._emit("fsync", api=name, path=path, handle=entry[2] if entry else None, is_dir=is_dir)
            return
        if name == "ftruncate":
            fd, path = _annotation(args[0])
            entry = self.fds.get(fd)
            self._emit("truncate", api=name, path=path, handle=entry[2] if entry else None, size=int(args[1]))
            return
        if name == "truncate":
            self._emit("truncate", api=name, path=self._path(pid, args[0]), size=int(args[1]))
            return
        if name == "close":
            fd, path = _annotation(args[0])
            entry = self.fds.pop(fd, None)
            if entry is not None and entry[1] and not entry[4]:
                self._emit("close", api=name, path=entry[0], handle=entry[2])
            return
        if name in ("rename", "link"):
            self._emit(name, api=name, path=self._path(pid, args[0]), dest=self._path(pid, args[1]))
            return
        if name in ("renameat", "renameat2", "linkat"):
            source = self._path(pid, args[1], args[0])
            by_fd = _PROC_FD.match(source)
            if name == "linkat" and by_fd and int(by_fd.group(1)) in self.fds:
                source = self.fds[int(by_fd.group(1))][0]  # linkat of an open (O_TMPFILE) file by descriptor
            self._emit("rename" if name.startswith("rename") else "link", api=name,
                       path=source, dest=self._path(pid, args[3], args[2]))
            return
        if name in ("unlink", "rmdir", "mkdir"):
            self._emit(name, api=name, path=self._path(pid, args[0]))
            return
        if name == "unlinkat":
            self._emit("rmdir" if "AT_REMOVEDIR" in args[2] else "unlink", api=name,
                       path=self._path(pid, args[1], args[0]))
            return
        if name == "mkdirat":
            self._emit("mkdir", api=name, path=self._path(pid, args[1], args[0]))
            return
        if name in ("sync", "syncfs"):
            self._emit("sync", api=name)
            return
        if name == "chdir":
            self.cwd = self._path(pid, args[0])
            return
        if name == "fchdir":
            self.cwd = _annotation(args[0])[1]

    # -- the judge's questions -----------------------------------------------------------------
    def tracer_killed(self) -> bool:
        """Whether strace was killed while the worker lived (then it never wrote how the worker ended)."""
        self._read()
        return self.first_pid is not None and not self.worker_ended

    def take(self, wire_bytes: int) -> list[Op]:
        """The operations the kernel saw before the worker wrote byte ``wire_bytes`` to the judge."""
        n = 0
        while n < len(self.ops) and self.ops[n][0] < wire_bytes:
            n += 1
        taken = [op for _, op in self.ops[:n]]
        del self.ops[:n]
        return taken

    def check(self, recorded: Iterable[Any], wire_bytes: int, watch: Iterable[str],
              since: int = 0) -> Optional[str]:
        """Compare ``recorded`` (the worker's operations up to one of its messages) with the kernel's.

        ``wire_bytes``: how many bytes the judge had read from the worker when that message ended.
        ``since``: where the recorded call began on the pipe; what the kernel saw before it belongs to
        calls made without a recorder, and is dropped (an ``os.sync()`` there names no folder that
        would keep it out of the comparison).
        Returns None when they agree, else a sentence for the learner (beginning with :data:`MISMATCH`).
        """
        if not self.catch_up(wire_bytes):
            return (f"{MISMATCH}: " + (f"the trace was interfered with ({self.tampered})" if self.tampered else
                                       "the trace of your process stopped before its last message to the grader"))
        if self.tampered:
            return f"{MISMATCH}: the trace was interfered with ({self.tampered})"
        self.take(since)
        kernel = self.take(wire_bytes)
        roots = [os.path.realpath(w) for w in watch]
        if not roots:
            return None
        return compare([op for op in recorded if isinstance(op, Op)], kernel, roots)


# -- comparing ------------------------------------------------------------------------------------

def _inside(path: Optional[str], roots: list) -> bool:
    return path is not None and any(path == r or path.startswith(r + os.sep) for r in roots) \
        and "__pycache__" not in path and not path.endswith((".pyc", ".pyo"))


def _real(path: Optional[str], cache: dict) -> Optional[str]:
    if path is None:
        return None
    parent, name = os.path.split(path)
    if parent not in cache:
        cache[parent] = os.path.realpath(parent)
    return os.path.join(cache[parent], name)


_PROC_FD = re.compile(r"^/proc/(?:self|\d+)/fd/(\d+)$")
# A file with no name yet: the recorder's placeholder, or the kernel's `/dir/#inode`.
_NAMELESS = re.compile(r"^(?:\.O_TMPFILE-\d+|#\d+)$")


def _nameless(path: Optional[str]) -> Optional[str]:
    if path and _NAMELESS.match(os.path.basename(path)):
        return os.path.join(os.path.dirname(path), "(a file with no name)")
    return path


_OPEN_FLAGS = frozenset({"create", "trunc", "append", "excl", "sync", "tmpfile"})


def _key(op: Op, real: Any) -> tuple:
    path, dest = _nameless(real(op.path)), _nameless(real(op.dest))
    if op.kind == "open":
        # "sync" too: a claimed O_SYNC would make every write durable on return for the power-cut models.
        return ("open", path, frozenset(op.flags) & _OPEN_FLAGS)
    if op.kind == "write":
        return ("write", path)
    if op.kind == "truncate":
        return ("truncate", path, op.size)
    if op.kind in ("rename", "link"):
        return (op.kind, path, dest)
    return (op.kind, path)


def _same_write(mine: Op, kernel: Op) -> bool:
    if ELIDED in mine.flags:  # the worker sent only the size: the bytes are the kernel's to give
        same = mine.size == kernel.size and "cut" not in kernel.flags
    elif "cut" in kernel.flags:  # strace printed only the first bytes (or none: sendfile)
        same = len(mine.data) == kernel.size and mine.data.startswith(kernel.data)
    else:
        same = mine.data == kernel.data
    return same and (kernel.offset < 0 or mine.offset == kernel.offset)


def _take_kernel_bytes(mine: Op, kernel: Op) -> None:
    """The crash states are built from what the kernel was asked to write: the recorded write keeps
    its place in the loop (save point, tool) and takes the kernel's bytes."""
    if "cut" not in kernel.flags:
        mine.data, mine.size = kernel.data, len(kernel.data)
        if ELIDED in mine.flags:
            mine.flags = mine.flags - {ELIDED}


def compare(recorded: list, kernel: list, roots: list) -> Optional[str]:
    """The first difference between two accounts of the same run, in a learner's words (None: none).

    Each recorded write that agrees with the kernel's takes the kernel's bytes (in place), so what
    the crash states are built from is the kernel's account; the recorder's list only names where in
    the loop each operation happened. A write the worker sent without its bytes (:data:`ELIDED`)
    agrees by size and offset, and gets its bytes only here.
    """
    cache: dict = {}

    def real(path: Optional[str]) -> Optional[str]:
        return _real(path, cache)

    def kept(ops: list) -> list:
        # A write of nothing changes nothing (shutil.copyfile's last sendfile returns 0 at the end of
        # its source, and the recorder has no operation for it).
        # os.sync() names no file but makes every one durable, so it is compared wherever it happens.
        return [op for op in ops if op.kind in COMPARED and not (op.kind == "write" and not op.data and not op.size)
                and (op.kind == "sync" or _inside(real(op.path), roots) or _inside(real(op.dest), roots))]

    mine, theirs = kept(recorded), kept(kernel)
    for i in range(max(len(mine), len(theirs))):
        a = mine[i] if i < len(mine) else None
        b = theirs[i] if i < len(theirs) else None
        if a is not None and b is not None and _key(a, real) == _key(b, real) \
                and (a.kind != "write" or _same_write(a, b)):
            if a.kind == "write":
                _take_kernel_bytes(a, b)
            continue
        if a is None:
            return f"{MISMATCH}: the kernel saw {_told(b)}, which is missing from the recorded operations"
        if b is None:
            return f"{MISMATCH}: the recorded operations include {_told(a)}, which the kernel never saw"
        return f"{MISMATCH}: the kernel saw {_told(b)} where the recorded operations have {_told(a)}"
    return None


def _told(op: Op) -> str:
    if op.kind == "write" and ("cut" in op.flags or ELIDED in op.flags):
        return f"{op.api} of {op.size} bytes to {os.path.basename(op.path or '?')}"
    return op.describe()


# -- strace's argument syntax ------------------------------------------------------------------------

# A quoted string or a descriptor's ``<path>`` (each skipped whole: under ``-x`` either may hold
# commas and brackets; strace escapes ``"`` in both and ``>`` in a path), or a separator.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|<[^>]*>|[\[\]{}]|, ')


def _split(args: str) -> list[str]:
    """Top-level arguments of one call. Quoted strings are stepped over whole by one regular
    expression, so a comma or bracket inside a written string is never taken for a separator, and
    a line of a megabyte is scanned at C speed."""
    if '"' not in args and "<" not in args and "[" not in args and "{" not in args:
        return args.split(", ")
    out, depth, start = [], 0, 0
    for m in _TOKENS.finditer(args):
        token = m.group()
        if token[0] in '"<':
            continue
        if token in "[{":
            depth += 1
        elif token in "]}":
            depth -= 1
        elif depth == 0:
            out.append(args[start:m.start()])
            start = m.end()
    out.append(args[start:])
    return out


def _string(arg: str) -> tuple[bytes, bool]:
    """A quoted string argument: its bytes, and whether strace cut it short."""
    arg = arg.strip()
    if not arg.startswith('"'):
        raise ValueError(f"not a string: {arg[:40]}")
    end = arg.rindex('"')
    return _unescape(arg[1:end]), arg[end + 1:].startswith("...")


def _annotation(arg: str) -> tuple[int, str]:
    """``3<path>`` (strace -y): the descriptor and the path it names (AT_FDCWD gives -100)."""
    arg = arg.strip()
    lt = arg.index("<")
    head = arg[:lt]
    fd = -100 if head == "AT_FDCWD" else int(head)
    return fd, os.fsdecode(_unescape(arg[lt + 1:arg.rindex(">")]))


_IOV = re.compile(r'iov_base=("(?:[^"\\]|\\.)*"(?:\.\.\.)?)')


def _iovecs(arg: str) -> tuple[bytes, bool]:
    parts, cut = [], arg.rstrip().endswith("...]") or "..." in arg.rsplit('"', 1)[-1]
    for m in _IOV.finditer(arg):
        data, short = _string(m.group(1))
        parts.append(data)
        cut = cut or short
    return b"".join(parts), cut
