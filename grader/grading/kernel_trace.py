"""What the kernel saw the worker do to files, from ``strace`` outside the worker's Python.

The recorder (:mod:`grader.engine.recorder`) runs inside the worker, in the same interpreter as the
submission, so a submission can edit what it wrote down (``Recorder.ops``) before it reaches the
judge. This module takes a second account that the submission cannot edit: ``strace -f
--seccomp-bpf`` starts the worker, and writes every file-system system call it makes (with every
byte of every write) to a file that has no name anywhere (created and unlinked by the judge;
strace reaches it through the descriptor it was handed, and the worker closes that descriptor
before any of the submission's code runs).

What happened on disk is what the kernel says happened (as in ALICE and CrashMonkey). After each
message from the worker, the judge waits until the trace has caught up with it (the kernel saw the
worker write every byte of it to the judge's pipe) and takes the system calls made before it
(:meth:`KernelTrace.settle`). Those become the operations the crash states are built from, in the
kernel's order: each file named by the path the kernel resolved (``-y`` prints the path behind each
descriptor; a path argument is made absolute against the working folder or the ``dir_fd`` folder,
``.``, ``..`` and doubled slashes folded, links to folders followed), each open file by the
kernel's descriptor (a ``dup`` shares it), with the kernel's bytes, offsets and flags, inside the
watched folders and out. The recorder's operations sent with the message only label them
(:func:`label`): the Python function that made the call, whether a file existed before its open.
A recorded operation with no counterpart in the kernel's account is refused as forged; a kernel
operation the recorder did not see (``pwritev2``, a write through ``ctypes``, a library's own
writes, another process's ``mv``) is still a crash point, named by its system call, and fails
nothing on its own. The labels of the crash points that matter for a level (save point A or B,
which tool, a model call) are the judge's own events, placed between the kernel's operations by
the order of the messages.

What the trace cannot see, and is refused when it touches a watched folder, with the reason
(:func:`translate`): bytes stored through a shared, writable memory map (``mmap`` is traced, the
stores are not), and a symbolic link (the crash models do not follow links); io_uring, which
changes files with no system call per change, is refused outright (the tracer makes
``io_uring_setup`` fail, and a run that tried is not graded). Bytes copied inside the kernel
(``sendfile``, ``copy_file_range``) are not printed by strace: they are read from the trace's own
account of the source (:class:`_Contents`) when it wrote that file itself, or when the file was in a
watched folder as the judge read it before the call (:meth:`KernelTrace.seed`); else they are unknown,
and a run that copies them into a watched folder is refused. The worker's words (shutil's audit event,
which the code can raise itself) never give a copy its bytes: a copy of spaces announced as a copy of
the checkpoint onto itself earned 10. A path argument is resolved when the judge reads the trace (a moment after the call): a link
made and removed between two messages of the worker may be missed, and the replay's comparison
with the disk then reports the difference.

The parsing half (:class:`KernelTrace` reading strace's ``-f -y -x`` lines into
:class:`~grader.engine.ops.Op`; :func:`translate`, :func:`label` and :func:`reconcile`) knows nothing
of levels or workers, so any program's trace can be read the same way.

What the tracer costs, and why it is outside the worker's Python but inside today's box: see
``benchmarks/README.md`` and the README's section on why a submission cannot grade itself. A
submission that kills its tracer gains nothing: with ``--seccomp-bpf`` every traced system call of
an untraced process fails (ENOSYS), so it can no longer open a file or answer the judge.
"""

from __future__ import annotations

import codecs
import collections
import itertools
import os
import re
import shutil
import stat
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, NamedTuple, Optional

from grader.engine.ops import Op, join_write, short_name
from grader.grading.wire import COPIES, ELIDED

# The calls that change files (and the few that say where a relative path points, or where the
# next write lands). Reads are not traced: they change nothing a crash could leave behind.
CALLS = ("open,openat,creat,write,pwrite64,writev,pwritev,pwritev2,sendfile,copy_file_range,lseek,"
         "rename,renameat,renameat2,link,linkat,unlink,unlinkat,rmdir,mkdir,mkdirat,fsync,fdatasync,"
         "ftruncate,truncate,close,chdir,fchdir,sync,syncfs,io_uring_setup,dup,dup2,dup3,fcntl,mmap,"
         "symlink,symlinkat,clone,clone3,fork,vfork,unshare,splice,openat2,io_setup,fallocate,"
         # How a descriptor is closed or made with no open: its number may then name another file.
         "close_range,sendmsg,recvmsg,recvmmsg,pidfd_getfd,"
         # An exec closes every descriptor marked close-on-exec, with no close call (see KernelTrace._exec).
         "execve,execveat,"
         # Where a descriptor's next write lands moves with its reads too, printed raw (no bytes: see RAW).
         "read,readv")
# Reads, printed as numbers: the descriptor and how far the position moved, never the bytes read.
RAW = "raw=read,readv"
# io_uring would change files with no system call of its own (and no line in the trace): the
# tracer makes it fail, as a kernel without it would, and Python's own file code never uses it.
REFUSED = "io_uring_setup:error=EPERM"
# Calls that would change a file in ways the crash states cannot be rebuilt from, each failed by the tracer
# as a kernel or file system without it fails it (Python's own file code never needs them): openat2 (an
# open, truncate included, from a kernel after 5.6; answered as an older kernel answers), native AIO
# (io_setup: writes with no write call; answered as a kernel built without it), fallocate (holes punched,
# zeroed ranges: answered as a file system without it, so os.posix_fallocate writes its zeros itself, and
# the trace sees them).
ALSO_REFUSED = ("openat2:error=ENOSYS", "io_setup:error=ENOSYS", "fallocate:error=EOPNOTSUPP")


# The signals strace prints: the ones that end a process its parent stops (a killed task then shows by its
# end, see _CLONES); no other delivery is printed.
SIGNALS = "signal=SIGKILL,SIGTERM"


def refusals() -> list:
    """strace's arguments that fail every call the trace could not follow (REFUSED, ALSO_REFUSED)."""
    return [w for spec in (REFUSED,) + ALSO_REFUSED for w in ("-e", "inject=" + spec)]

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
# How many operations (and, for a fault check, calls) one worker's trace may hold for the judge, and one
# run's recording keep: correct loops of every level make under 2,000 in a run (level 6's long one), and
# each costs the judge some 400 bytes, twice (the trace's copy and the recorder's). A trace is at most
# 64 MiB of text, which could name 1.6 million.
MAX_OPS = 20_000
TOO_MANY = (f"a broken run: your code made more than {MAX_OPS:,} file operations (opens, writes, fsyncs, closes, "
            "renames...) in one run, as the kernel counted them; a checkpointing loop makes a few thousand, and the "
            "grader does not rebuild more. Writes made back to back through one file count as one (a write per "
            "line, a loop of small os.write calls), so look for a file opened or written in a loop that never ends, "
            "or small writes with something between each two: an fsync or a seek after every line, writes "
            "that take turns between two files, pwrite at offsets of its own. Hand each save's bytes over in one "
            "write (f.write(json.dumps(state))). Your own pytest sets no such limit, so it may pass there")

# What the box's code may make the tracer print, the judge's own pipe aside: the box's cap on one file
# (grader.grading.sandbox.Limits.file_size). Past it the judge stops reading and the run is stopped
# (FLOOD). The worker's messages to the judge are printed too (a fresh child's answer carries the state
# a loader returned: level 6's solution sends some 16 MiB of them in a grading run), but they are not
# counted: the judge reads each of them from its pipe anyway, and refuses a broken one, so their text
# in the trace is never more than the judge already read. The tracer's own cap on its file
# (Limits.trace, larger) bounds the whole trace when the judge is not reading it.
FLOOD = ("your code wrote more than {mib} MiB in all (to files, /dev/null, pipes or the screen: the grader's "
         "trace of it holds every byte, and is capped like any file of the box), so the run was stopped and "
         "nothing is scored. A checkpointing loop writes far less: look for a write or a print in a loop")

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
_BARE_FD = re.compile(r"(\d+)(?:,|$)")  # ... printed bare: strace could not name its file
# A file with no name (O_TMPFILE, or unlinked while open) reads `3</dir/#1234>(deleted)`.
_CALL = re.compile(r"^(\w+)\((.*)\) += (-?\d+|0x[0-9a-f]+|\?)(?:<([^>]*)>(?:\(deleted\))?)?(?: .*)?$")
_RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>(.*)$")
_UNFINISHED = " <unfinished ...>"
# The calls that start a process or a thread: a new process gets a copy of its parent's descriptors, a
# thread (CLONE_FILES) shares them.
_CLONES = ("clone", "clone3", "fork", "vfork")
_CLONE_OPENINGS = tuple(f"{n}(" for n in _CLONES)
_CLONE_FS = re.compile(r"\bCLONE_FS\b")
# Whose child a new process or thread is. A clone made in a box returns the child's id in the box's pid
# namespace, while every line names a task by its id in strace's, so in a box no clone's value names its
# child (strace's --pidns-translation would, but looks each id up in /proc: 400 forks took 5 s instead of 3).
# And strace prints a clone when it returns, often after the child's first calls. What does hold: strace
# prints a clone's start before the child exists (the caller is stopped there until strace lets it go on),
# and, with exit lines on (no -qq), every task shows in the trace at least once, its exit if nothing else.
# So when a task first shows, its birth is one of the clones started and not yet matched with a child
# (KernelTrace.births); when there is only one, it is that one, whatever the ids. With several that would
# all start it alike (a parent forking again and again, nothing changed between), it starts so. Else (two
# forks before either child ran, the parent's table changed between), the tie is a guess as it always
# was (the first unfinished clone's table, a working folder corrected once the kernel names it: see
# unsure_cwd), and the births stay unmatched until as many tasks have shown as there were clones. No id is compared, so neither namespace's ids wrapping
# around pid_max can make a wrong tie. Where a clone's value does name its child (no pid namespace in the
# trace), that names it too.
_WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND")
_OPENS = ("open", "openat", "openat2", "creat")
_NOT_A_FOLDER = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_TMPFILE")  # flags an open of a folder fails with
_DUPS = ("dup", "dup2", "dup3", "fcntl")
# What the kernel trace cannot follow: a marker in the trace, turned into a refusal when it touches a
# watched folder (:func:`reconcile`). Never handed to the crash models.
MARKERS = frozenset({"mmap", "io_uring", "symlink", "proc", "append_off"})
# Markers refused wherever they point, not only in a watched folder: what io_uring does cannot be read at all,
# and a /proc link the trace could not follow names no path it could judge.
REFUSED_ANYWHERE = ("io_uring", "proc")
# A write through a descriptor the trace never saw opened, at that open file's position, which it cannot know.
UNPLACED = "position unknown"
# A descriptor's position (an entry's [3]) the trace no longer knows: moved by a call that says only that it moved
# (pwritev2's RWF_APPEND from the position, to the file's new end), until an lseek says where it is.
LOST = "lost"
# An fsync whose descriptor the judge could not tell a folder or a file (see KernelTrace._is_dir).
UNSURE = "folder or file?"
# Handles of every trace in this process come from one count, so two workers' files never share one
# (the recorder's handles, when there is no trace, count from 1 per call with a base far below this).
_HANDLES = itertools.count(1 << 40)

_problem: Optional[str] = None
_checked = False


def _unescape(text: str) -> bytes:
    """strace's escaped bytes (``-x``: printable ASCII as it is, ``\\n``, ``\\"`` and octal escapes, and a
    string holding any other byte wholly as ``\\xHH``). These are Python's own byte escapes, so
    ``codecs.escape_decode`` reads them at C speed: a save of a few hundred KB is one long line."""
    return codecs.escape_decode(text.encode("latin-1", "replace"))[0]


def _capped(command: list, file_size: int) -> list:
    """``command`` run with ``file_size`` as its cap on one file (and that of all it starts)."""
    if shutil.which("prlimit"):
        return ["prlimit", f"--fsize={file_size}:{file_size}", "--"] + list(command)
    import sys
    return [sys.executable, "-I", "-S", "-c", "import os, resource, sys; "
            f"resource.setrlimit(resource.RLIMIT_FSIZE, ({file_size}, {file_size})); "
            "os.execvp(sys.argv[1], sys.argv[1:])"] + list(command)


def strace_args() -> list:
    """strace and the options every trace of a box is taken with (grade's and explore's alike), before the
    caller's ``-o`` and command."""
    # -q, not -qq: exit lines show every task, one that made no traced call too (see _CLONES); a task killed
    # by a signal shows only if the signal is in the printed set (SIGKILL is never delivered, so it adds
    # no line but that one).
    return ["strace", "-f", "--seccomp-bpf", "-q", "-y", "-x", "-s", str(STRING_LIMIT), "-e", SIGNALS,
            "-e", "trace=" + CALLS, "-e", RAW] + refusals()


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


class _Birth:
    """One clone of the trace: who made it, with which flags, and, once it returned, the table and working
    folder its child starts with (its parent's then); ``child``, the task tied to it."""

    __slots__ = ("parent", "flags", "table", "cwd", "child", "shape")

    def __init__(self, parent: str, flags: str):
        self.parent, self.flags = parent, flags
        self.table: Optional[dict] = None
        self.cwd: Optional[list] = None
        self.child: Optional[str] = None
        self.shape: tuple = ()


class _Held:
    """One file's bytes as the trace itself shows them, or None where it cannot tell."""

    __slots__ = ("data",)

    def __init__(self, data: Optional[bytearray]):
        self.data = data


class _Contents:
    """What each file holds, as far as the trace alone can say: a file it saw made empty (created or
    opened with O_TRUNC) and then changed only by calls whose bytes strace printed whole. A copy made
    inside the kernel (``sendfile``, ``copy_file_range``: strace prints none of its bytes) takes its
    bytes from here when its source is such a file, as when a program writes a temp file and has
    ``cp`` copy it. Anything else the trace cannot follow (a mapped file, a write cut short, a file
    that was there before) makes the file unknown, and its copies stay without bytes, as before.
    What is held is capped (:data:`HELD_CAP`): past it, nothing more is learnt.
    """

    def __init__(self) -> None:
        self.by_path: dict = {}     # path -> _Held, under the names files have now
        self.by_handle: dict = {}   # handle -> _Held: which file a descriptor's writes change
        self.held = 0               # bytes the files hold now
        self.handed = 0             # bytes handed out as copies (they travel in the operations)

    def opened(self, path: str, handle: int, flags: str, is_dir: Optional[bool]) -> None:
        if is_dir:
            return
        held = self.by_path.get(path)
        if "O_TMPFILE" in flags:  # a new file with no name yet: its directory is the path
            held, path = _Held(bytearray()), None
        elif "O_TRUNC" in flags or "O_CREAT" in flags and "O_EXCL" in flags:
            if held is None:
                held = _Held(None)
            self._drop(held)
            held.data = bytearray()  # emptied (or made) by this open, for every name and descriptor it has
        elif held is None:
            # There before the trace began, or made without a word the trace keeps: nothing to hold,
            # unless it is opened for writing (its later writes must not be taken for another file's).
            if not any(f in flags for f in _WRITE_FLAGS):
                return
            held = _Held(None)
        if path is not None:
            self.by_path[path] = held
        self.by_handle[handle] = held

    def _drop(self, held: "_Held") -> None:
        """Give back what ``held`` holds (it is emptied, or no longer followed)."""
        if held.data is not None:
            self.held -= len(held.data)
            held.data = None

    def closed(self, handle: int) -> None:
        """The last descriptor of an open is closed: its handle changes nothing more."""
        self.by_handle.pop(handle, None)

    def forget(self) -> None:
        """A symbolic link was made: paths may now name files by routes the trace does not fold."""
        for held in list(self.by_path.values()) + list(self.by_handle.values()):
            self._drop(held)

    def wrote(self, handle: Optional[int], offset: int, data: bytes, whole: bool) -> None:
        held = self.by_handle.get(handle)
        if held is None or held.data is None:
            return
        grows = max(0, offset + len(data) - len(held.data))  # a write past the end fills the gap with zeros
        if not whole or offset < 0 or self.held + grows > HELD_CAP:
            self._drop(held)
            return
        if offset > len(held.data):
            held.data.extend(bytes(offset - len(held.data)))
        held.data[offset:offset + len(data)] = data
        self.held += grows

    def size(self, handle: Optional[int]) -> Optional[int]:
        held = self.by_handle.get(handle)
        return len(held.data) if held is not None and held.data is not None else None

    def at_end(self, handle: Optional[int]) -> int:
        """Where an appending descriptor's next write lands, or -1 if the file is unknown."""
        held = self.by_handle.get(handle)
        return len(held.data) if held is not None and held.data is not None else -1

    def truncated(self, size: int, handle: Optional[int] = None, path: Optional[str] = None) -> None:
        held = self.by_handle.get(handle) if handle is not None else self.by_path.get(path)
        if held is not None and held.data is not None:
            if size < len(held.data):
                self.held -= len(held.data) - size
                del held.data[size:]
            elif self.held + size - len(held.data) > HELD_CAP:  # zeros count as held bytes too
                self._drop(held)
            else:
                self.held += size - len(held.data)
                held.data.extend(bytes(size - len(held.data)))

    def lost(self, handle: Optional[int] = None, path: Optional[str] = None) -> None:
        """The trace cannot follow what happens to this file from now on (a shared, writable map)."""
        held = self.by_handle.get(handle) if handle is not None else self.by_path.get(path)
        if held is not None:
            self._drop(held)

    def renamed(self, source: str, dest: str, link: bool = False) -> None:
        """A rename or a hard link (of a file, or a folder and everything under it)."""
        if source == dest:
            return  # a rename of a name onto itself does nothing
        inside = source + os.sep
        moved = {p: h for p, h in self.by_path.items() if p == source or p.startswith(inside)}
        for gone in [p for p in self.by_path if p == dest or p.startswith(dest + os.sep)]:
            self.by_path.pop(gone, None)
        for p, h in moved.items():
            if not link:
                self.by_path.pop(p, None)
            self.by_path[dest + p[len(source):]] = h

    def seeded(self, path: str, data: bytes) -> bool:
        """A file as the judge read it before a call (see :meth:`KernelTrace.seed`); False when the trace holds
        as much as it may. A name the trace already follows keeps its bytes while they are what the file holds:
        the judge may have laid out other bytes between two calls (a crash state), and those are the file now
        (a descriptor the box still holds keeps the bytes it had)."""
        held = self.by_path.get(path)
        if held is not None and held.data is not None and held.data == data:
            return True
        if self.held + len(data) > HELD_CAP:
            return False
        self.by_path[path] = _Held(bytearray(data))
        self.held += len(data)
        return True

    def linked(self, handle: int, dest: str) -> None:
        """A file opened with O_TMPFILE given its name."""
        if handle in self.by_handle:
            self.by_path[dest] = self.by_handle[handle]

    def removed(self, path: str) -> None:
        inside = path + os.sep
        for gone in [p for p in self.by_path if p == path or p.startswith(inside)]:
            del self.by_path[gone]

    def copied(self, handle: Optional[int], offset: Optional[int], size: int) -> Optional[bytes]:
        """The ``size`` bytes at ``offset`` of the file behind ``handle``, or None if the trace cannot say."""
        held = self.by_handle.get(handle)
        if held is None or held.data is None or offset is None or offset < 0 or size < 0 \
                or offset + size > len(held.data) or self.handed + size > HELD_CAP * 4:
            return None
        self.handed += size
        return bytes(held.data[offset:offset + size])


# The most bytes the judge holds at once to give in-kernel copies their bytes (the files' contents);
# the bytes handed out as copies over a whole run may be four times that: a box that copies a file
# again and again cannot make the judge hold more.
HELD_CAP = 16 * 1024 * 1024


class KernelTrace:
    """One worker's strace output, read as it grows, turned into :class:`~grader.engine.ops.Op`.

    Use: ``KernelTrace(folder)``, :meth:`wrap` the worker's command (``pass_fds`` += :attr:`pass_fds`),
    :meth:`started` with the judge's end of the pipe the worker writes to, then :meth:`check`
    after each message.
    """

    def __init__(self, scratch: str, keep_calls: bool = False, cap: int = STRING_LIMIT):
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
        self.cap = cap  # trace text the box may make, the judge's pipe aside (see FLOOD)
        self.kit_text = 0  # trace text of writes to the judge's pipe: not counted against the cap
        self.flooded = False
        self.tail = b""
        self.parts: list = []  # pieces of a line longer than one read, after self.tail
        self.pipe: Optional[str] = None  # the judge's pipe as strace names it: pipe:[inode]
        self._judge_line: Optional[re.Pattern] = None  # how a write to it begins in the trace
        self.wire = 0  # bytes the kernel saw the worker write to the judge's pipe
        self.ops: list[tuple[int, Op]] = []  # (wire bytes before it, the operation)
        self.pending: dict[str, str] = {}  # pid -> the first half of an unfinished call
        # Clones started whose child has not shown yet (see _CLONES), in order; how many tasks took one of
        # them by a guess (which one is not known); clones whose value named their child (no pid namespace):
        # child -> its birth; the unfinished clone of each task; and whether the trace may hold more than
        # one pid namespace (then no clone's value is read as an id of strace's).
        self.births: dict[int, _Birth] = {}  # id -> birth, in the order the clones started
        self.starts: collections.Counter = collections.Counter()  # how many of them start a child each way
        self.blind = 0
        self.named: dict[str, _Birth] = {}
        self.cloning: dict[str, _Birth] = {}
        self.namespaced = False
        self.guessed: set = set()  # tasks tied to a birth by a guess
        self.gone: list = []  # the tables of tasks that ended (see _ended)
        self.ended: set = set()  # their ids, until a new task takes one again (ids wrap around pid_max)
        # The working folder of each process, in a one-item list its threads share (CLONE_FS); a child
        # process starts with a copy of its parent's, so a child's chdir never moves its parent's paths.
        self._root_cwd = ["/"]
        self.cwds: dict[str, list] = {}
        # Processes seen before their parent's clone returned (strace often prints a child's first calls
        # first): their working folder is a guess, the last any process moved to (one for all, as it was),
        # until the clone names the parent; the operations named by a relative path meanwhile, to be
        # named again then: pid -> [(operation, "path" or "dest", the relative path)].
        self.unsure_cwd: dict[str, list] = {}
        self.moved_cwd: set = set()  # of those, the ones that changed folder themselves meanwhile
        self.last_cwd = "/"
        self._guesses: list = []  # (pid, path as guessed, relative path) of the call being read
        # fd -> [path it was opened at, writable, handle, position or None, is_dir]; a dup()ed descriptor
        # shares the list (and so the position), as it shares the open file in the kernel. One table per
        # process: its threads share it, and a child process starts with a copy (the same lists: an
        # inherited descriptor shares its open file with the parent's). ``fds`` is the table of the
        # thread whose line is being read; fd 5 in one process is not fd 5 in another.
        self.fds: dict[int, list] = {}
        self._root = self.fds  # the first process's table, and that of any process whose start the trace missed
        self.tables: dict[str, dict[int, list]] = {}  # pid (a thread's id, as strace prints it) -> its table
        # Folders the trace saw made (mkdir), under the names they have now: a folder made, fsynced and
        # renamed into place is no longer where it was made by the time the judge could look.
        self.made_dirs: set = set()
        # Paths the trace saw made files (a writing open: the kernel refuses one of a folder), under the names they
        # have now: whether a later open of the name is a folder is then known, not looked up on the disk, where
        # a folder may be back by the time the judge looks.
        self.made_files: set = set()
        self.contents = _Contents()  # the bytes of files the trace itself wrote, for in-kernel copies
        self.links: Optional[bool] = None  # whether a symbolic link may be under root (see _path)
        self.root = os.path.realpath(scratch)  # the box's own folder: bound at the same path inside
        self.pool: list = []  # this call's kernel operations no recorded one has claimed yet (see settle)
        self.pool_since: Optional[int] = None
        self.opened_by: dict = {}  # handle -> the Python function its open was labelled with (see _python_words)
        self.tampered: Optional[str] = None
        self.renamed: list = []   # the names renamed away, in order (see _through_proc)
        self.in_flight: list = []  # (path, table entry) of descriptors sent over a Unix socket, not yet received
        self._unresolved: Optional[str] = None  # a path through /proc the call named that the trace cannot follow
        self.refused: Optional[str] = None  # a broken run, told as such (TOO_MANY)
        self.sync_handles: set = set()  # handles opened with O_SYNC or O_DSYNC: their writes are never joined
        self._tid = ""  # the thread whose line is being read
        self._last_write: Optional[tuple] = None  # (its thread, the wire then, the op) of a write just emitted
        self.proc: Any = None
        self.first_pid: Optional[str] = None  # the worker: strace's first tracee
        self.worker_ended = False  # strace wrote how the worker ended (it does unless it was killed first)
        # With keep_calls: every call in KEPT, in order (see Call), and what the worker's own thread is.
        self.calls: Optional[list[Call]] = [] if keep_calls else None
        self.counts: dict[tuple, int] = {}
        self.open_flags: dict[int, tuple] = {}  # fd -> (path, open flags), for the kept calls
        self.main_tid: Optional[str] = None  # the thread that answers the judge (the first to write to its pipe)

    @property
    def cwd(self) -> str:
        """The first process's working folder (and that of any process whose start the trace missed)."""
        return self._root_cwd[0]

    @cwd.setter
    def cwd(self, value: str) -> None:
        self._root_cwd[0] = self.last_cwd = value

    @property
    def pass_fds(self) -> tuple:
        return (self.fd,)

    def wrap(self, command: list, cwd: str, inject: Iterable[str] = (), file_size: Optional[int] = None) -> list:
        """``command`` started under strace, writing to this trace.

        ``inject``: more of strace's ``inject=`` expressions (``fsync:error=EIO:when=3``), the faults a
        check makes the kernel report (:mod:`grader.grading.faults`). ``file_size``: the cap on one file
        of ``command`` and what it starts, set under strace (which is started with a larger one, for the
        trace: see FLOOD).
        """
        self.cwd = os.path.realpath(cwd)
        if file_size is not None:
            command = _capped(command, file_size)
        return strace_args() + [w for spec in inject for w in ("-e", "inject=" + spec)] \
            + ["-o", f"/proc/self/fd/{self.fd}", "--"] + list(command)

    def started(self, judge_end: int, proc: Any) -> None:
        self.pipe = f"pipe:[{os.fstat(judge_end).st_ino}]"
        self._judge_line = re.compile(rb"\d+ +write\(\d+<" + re.escape(self.pipe.encode()) + rb">, ")
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
            if self.flooded:
                return False
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
        while self.fd >= 0 and not self.flooded:
            chunk = os.pread(self.fd, 1 << 22, self.read_at)
            if not chunk:
                return
            self.read_at += len(chunk)
            if b"\n" not in chunk:
                # Part of one long line (a write of megabytes): kept in pieces, joined once it ends,
                # rather than copied again with every chunk.
                self.parts.append(chunk)
                if self._over():
                    return
                continue
            if self.parts:
                chunk = b"".join(self.parts) + chunk
                self.parts = []
            lines = (self.tail + chunk).split(b"\n")
            self.tail = lines.pop()
            for line in lines:
                if self._to_judge(line):
                    self.kit_text += len(line) + 1
                self._line(line.decode("latin-1"))
            if self._over():
                return

    def _to_judge(self, line: bytes) -> bool:
        """Whether a line of the trace is a write to the judge's pipe: strace names the descriptor's pipe
        by its inode under -y, before the bytes, so no other write can begin so."""
        return self._judge_line is not None and self._judge_line.match(line) is not None

    def _over(self) -> bool:
        """Whether the trace read so far, the judge's pipe aside, has passed the cap (then the run is
        refused, and nothing more is read). A line still being read counts whatever it writes to: the
        judge never holds more of one line than the cap, as when the trace itself was capped there (a
        write to its pipe may be printed before the judge has read it, or refused it)."""
        if self.read_at - self.kit_text <= self.cap:
            return False
        self.flooded = True
        self.parts, self.tail = [], b""
        if self.refused is None:
            self.refused = FLOOD.format(mib=self.cap // 2**20)
        return True

    def _line(self, line: str) -> None:
        m = _LINE.match(line)
        if not m:
            self._tamper(f"a line the tracer would never write: {line[:80]!r}")
            return
        pid, rest = m.groups()
        self._tid = pid
        if self.first_pid is None:
            self.first_pid = pid
        self.fds = self._table_of(pid)
        if rest.startswith(("+++ ", "--- ")):
            if rest.startswith("+++ "):
                self.worker_ended = self.worker_ended or pid == self.first_pid
                self.pending.pop(pid, None)  # a call it never finished is no clone still under way
                self._ended(pid, rest)
            return
        if rest.endswith(_UNFINISHED):
            self.pending[pid] = rest[: -len(_UNFINISHED)]
            if rest.startswith(_CLONE_OPENINGS):
                self._clone_started(pid, self.pending[pid])
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
        if name == "io_uring_setup":
            # Refused by the tracer (REFUSED), so it never works; the attempt is still noted, so a run
            # that meant to write through it is told why the grader will not follow it.
            self._emit("io_uring", api=name)
            return
        if name in _CLONES:
            self._clone_returned(pid, args, ret, rest)
            return
        if ret == "?" or ret.startswith("-"):
            self._no_result(pid, name, args, ret, rest)
            return
        if name in _WHOLE_LINE:  # read with raw arguments, an exec's argv: not split into arguments
            self._whole_line(pid, name, args, ret)
            return
        if name == "fcntl" and "F_DUPFD" not in args:
            self._flags_set(args)
            return  # F_GETFL and the like: nothing changes (and some return flags in hex)
        if name in ("lseek", "close"):
            self._moved_or_closed(name, args, ret)
            return
        if name == "mmap":
            self._mapped(args)
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

    def _no_result(self, pid: str, name: str, args: str, ret: str, line: str) -> None:
        """A call that failed changed nothing. One strace printed no result for (``= ?``, and not to be started
        again) is one its task died inside, killed: the kernel may have done some or all of it (a write stops
        where it got to, a rename is done or not). Dropped, a child killed by its parent in the middle of
        writing spaces over the checkpoint left them there unseen (``overwrites_in_a_child_killed_mid_write.py``).
        It is taken as done: each crash state it may have left (any part of a write) is then one the crash models
        already make, and one not done shows as a difference with the disk."""
        if ret != "?" or "ERESTART" in line or name not in _DIED_INSIDE:
            return
        try:
            parts = _split(args)
            if name in ("write", "pwrite64", "writev", "pwritev", "pwritev2"):
                data, cut = _WRITTEN[name](parts)
                self._call(pid, name, parts, len(data) if not cut else _requested(parts, name), None)
            elif name in _OPENS:
                flags = parts[1 if name == "open" else 2] if name != "creat" else "O_TRUNC"
                if "O_TRUNC" in flags:  # its descriptor died with it: what it may have done is the truncate
                    path = self._path(pid, parts[0]) if name in ("open", "creat") else self._at(_Syscall(pid, name, parts, 0, None), 0)
                    self.contents.truncated(0, path=path)
                    self._emit("truncate", api=name, path=path, size=0)
            else:
                self._call(pid, name, parts, 0, None)
        except (ValueError, IndexError, KeyError) as exc:
            self._tamper(f"a {name} line that could not be read ({exc})")

    def _whole_line(self, pid: str, name: str, args: str, ret: str) -> None:
        if ret != "?" and not ret.startswith("-"):
            _WHOLE_LINE[name](self, pid, args, int(ret, 0))

    def _read_moved(self, pid: str, args: str, size: int) -> None:
        """A read (or readv) from the position: the descriptor's next write lands ``size`` bytes further on. (Not
        followed, a correct save that read its temp file back with json.load before writing a last newline had
        that newline put at 0 in the replay, and was refused as changed by a route the trace does not see.)"""
        first = args.split(",", 1)[0].strip()
        entry = self.fds.get(int(_LEADING_INT.match(first).group(0), 0)) if _LEADING_INT.match(first) else None
        if entry is not None and entry[3] is not None and entry[3] is not LOST:
            entry[3] += size

    def _exec(self, pid: str, args: str = "", ret: int = 0) -> None:
        """A program started with execve: the kernel closed every descriptor marked close-on-exec, with no close
        call for the trace to see. Nearly every descriptor a Python program opens is so marked (PEP 446), but the
        mark comes and goes by calls the trace does not follow (ioctl FIOCLEX, fcntl F_SETFD), so only standard
        input, output and error are kept, where a program started by another gets the files it is handed
        (subprocess's stdout=f). Any other number names nothing the trace knows from here: kept, a number the
        exec had closed, filled again by a call the trace does not follow (a memfd, open_tree), still named the
        old file, and an fsync of the memfd was credited to the temp file. A write through a descriptor truly
        kept across the exec is then one the trace never saw opened."""
        old, self.fds = self.fds, {fd: entry for fd, entry in self.fds.items() if fd <= 2}
        # A table of its own: another process sharing the old one (clone with CLONE_FILES) keeps it whole.
        self.tables[pid] = self.fds
        if old is self._root and pid == self.first_pid:
            self._root = self.fds
        for fd, entry in old.items():
            if fd > 2:
                self._release(entry)

    def _flags_set(self, args: str) -> None:
        """fcntl(F_SETFL) turning O_APPEND on: the descriptor's writes land at the end from now on,
        whatever its position. Turning it off on a descriptor opened or set to append makes its writes land
        at its position, which the trace does not follow while it appends (nor the crash models, which
        keep an appending open appending): a marker, refused on a watched file."""
        target = _TARGET.match(args)
        if target is None:
            return
        rest = args[target.end():].split(",")  # after the descriptor (whose path may hold any word)
        if len(rest) > 2 and rest[1].strip() == "F_SETFL":
            entry = self.fds.get(int(target.group(1)))
            if entry is None:
                return
            if "O_APPEND" in rest[2]:
                entry[3] = None
            elif entry[3] is None and entry[1] and not entry[4]:
                self._emit("append_off", api="fcntl", path=entry[0], handle=entry[2])

    def _moved_or_closed(self, name: str, args: str, ret: str) -> None:
        """An lseek or a close: a third of a run's lines (Python asks where it is at every open). Only
        the descriptor counts, and its number comes before the path strace names it by."""
        target = _TARGET.match(args) or _BARE_FD.match(args)  # (bare: a file strace could not name)
        if target is None:
            self._tamper(f"a {name} line that could not be read (no descriptor in {args[:40]!r})")
        elif name == "close":
            self._closed(int(target.group(1)))
        else:
            entry = self.fds.get(int(target.group(1)))
            if entry is not None and entry[3] is not None:
                entry[3] = int(ret)  # a decimal offset: the line matched _CALL, and "?" was left out above

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
        if len(self.calls) >= MAX_OPS:
            self.refused = TOO_MANY
            return
        self.calls.append(Call(pid, name, ordinal, self.wire, value, failed.group(1) if failed else None,
                               line.rstrip().endswith("(INJECTED)"), path, flags, at_cwd))

    # -- one system call -----------------------------------------------------------------------
    def _path(self, pid: str, arg: str, dirfd: Optional[str] = None) -> str:
        """A path argument as the kernel resolved it: relative to the working folder or to the folder
        behind ``dirfd`` (strace -y names it), ``.``, ``..`` and doubled slashes folded away, and inside the
        box's own folder (bound at the same path in the box) its folders' links followed, so one file
        has one name however the code spelled it."""
        path = os.fsdecode(_string(arg)[0])
        if dirfd is not None and dirfd.startswith("AT_FDCWD<"):
            # strace -y names the calling process's working folder as the kernel has it: the tracked one
            # follows it, and a guessed one becomes known (see unsure_cwd).
            self._cwd_seen(pid, _annotation(dirfd)[1])
        guessed = None
        if not os.path.isabs(path):
            base = _annotation(dirfd)[1] if dirfd is not None and "<" in dirfd else None
            if base is None and pid in self.unsure_cwd:
                guessed = path
            path = os.path.join(base or self.cwds.get(pid, self._root_cwd)[0], path)
        if "/proc" in path or "/dev/" in path:
            path = self._through_proc(pid, path)
        path = self._folded(path)
        if guessed is not None:
            self._guesses.append((pid, path, guessed))
        return path

    def _through_proc(self, pid: str, path: str) -> str:
        """A path that passes through one of /proc's links into a process (``/proc/self/cwd``, ``/proc/self/root``,
        ``/proc/self/fd/N``, ``/proc/thread-self/...``, and ``/dev/fd/N`` or ``/dev/stdin``, links to them): the
        kernel follows each to the folder or file it stands for, so the trace does too, part by part (a ``..``
        after one climbs from where it led), from the calling thread's working folder and descriptors. Such a
        link into another process or thread (named by its id in the box, which the trace cannot map) or to a
        descriptor the trace never saw cannot be followed: the path stays as it is, and the call is marked
        (see :data:`MARKERS`)."""
        parts: list = []
        for part in path.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if parts:
                    parts.pop()
                continue
            parts.append(part)
            if len(parts) == 2 and parts[0] == "dev" and parts[1] in _STD_FDS:
                parts = ["proc", "self", "fd"] + ([_STD_FDS[parts[1]]] if _STD_FDS[parts[1]] else [])
            if parts[0] != "proc" or len(parts) < 3:
                continue
            own = parts[1] in ("self", "thread-self")
            link = parts[2:]
            if parts[1] == "self" and link[:1] == ["task"]:
                own, link = False, link[2:]  # a thread named by its id in the box
            if not (link in (["cwd"], ["root"]) or (len(link) == 2 and link[0] == "fd")):
                continue
            if not own:
                self._unresolved = path
                return path
            if link == ["root"]:
                parts = []
            elif link == ["cwd"]:
                parts = [p for p in self.cwds.get(pid, self._root_cwd)[0].split("/") if p]
            else:
                entry = self.fds.get(int(link[1])) if link[1].isdigit() else None
                # The link leads to the file or folder as it is named now; the trace knows it by the name it was
                # opened at, which a rename since (of it, or of a folder above it) has made another's.
                if entry is None or any(_under(entry[0], old) for old in self.renamed[entry[5] if len(entry) > 5 else 0:]):
                    self._unresolved = path
                    return path
                parts = [p for p in entry[0].split("/") if p]
        return "/" + "/".join(parts)

    def _folded(self, path: str) -> str:
        path = os.path.normpath(path)
        if path.startswith(self.root + os.sep) and self._links_under_root():
            # Read while the call's effects are still there (the judge reads the trace as the worker
            # runs, and the worker waits for the judge at each message). A link made and removed within
            # one stretch between two messages could still be missed: the file then shows under two
            # names, which the replay's comparison with the disk reports.
            parent, name = os.path.split(path)
            path = os.path.join(os.path.realpath(parent), name)
        return path

    def _links_under_root(self) -> bool:
        """Whether a folder under root could be a symbolic link: one was there when the trace was first
        read, or the trace has shown one made since. Without one, the path the kernel resolved is the
        folded path itself, and resolving each of its folders again on disk (thousands of lstat calls a
        run) can be skipped. The judge never makes links, and a box makes none without a traced call."""
        if self.links is None:
            self.links = False
            stack = [self.root]
            while stack and not self.links:
                try:
                    with os.scandir(stack.pop()) as entries:
                        for entry in entries:
                            if entry.is_symlink():
                                self.links = True
                                break
                            if entry.is_dir(follow_symlinks=False):
                                stack.append(entry.path)
                except OSError:
                    continue
        return self.links

    def _emit(self, kind: str, **fields: Any) -> None:
        op = Op(-1, kind, **fields)
        if kind == "open" and "sync" in op.flags:
            self.sync_handles.add(op.handle)
        # A write that continues the one just before it (nothing else on any file since, no message to the judge
        # between, so no mark of the loop either; the same thread and open file): one operation, before the cap
        # counts it (grader.engine.ops.join_write says why no crash state is lost).
        last = self._last_write
        if kind == "write" and last is not None and self.ops and last[2] is self.ops[-1][1] \
                and last[:2] == (self._tid, self.wire) and join_write(last[2], op, self.sync_handles):
            self._guesses = []
            return
        if len(self.ops) >= MAX_OPS:  # not yet taken by the judge (see take)
            self.refused = TOO_MANY  # and nothing more is kept: the judge's memory stays bounded
            return
        self.ops.append((self.wire, op))
        self._last_write = (self._tid, self.wire, op) if kind == "write" else None
        for pid, path, relative in self._guesses:
            for attr in ("path", "dest"):
                if getattr(op, attr) == path and pid in self.unsure_cwd:
                    self.unsure_cwd[pid].append((op, attr, relative))
        self._guesses = []

    def _cwd_seen(self, pid: str, folder: str) -> None:
        """The kernel named ``pid``'s working folder: if it was a guess and the process never moved, it is
        where the process started, so the operations named from the guess are named again from it."""
        box = self.cwds.get(pid, self._root_cwd)
        if pid in self.unsure_cwd and pid not in self.moved_cwd:
            self._rename_guesses(pid, folder)
        box[0] = folder

    def _rename_guesses(self, pid: str, folder: str) -> None:
        for op, attr, relative in self.unsure_cwd.pop(pid, ()):
            setattr(op, attr, self._folded(os.path.join(folder, relative)))
        self.moved_cwd.discard(pid)

    def _opened(self, ret: int, entry: list) -> None:
        """Descriptor ``ret`` now names ``entry``; what it named before is closed (dup2 over an open fd)."""
        old = self.fds.get(ret)
        if old is not None and old is not entry:
            self._closed(ret)
        self.fds[ret] = entry

    def _closed(self, fd: int) -> None:
        entry = self.fds.pop(fd, None)
        if entry is not None:
            self._release(entry)

    def _release(self, entry: list) -> None:
        """A descriptor of ``entry`` closed: a file stays open while any descriptor dup()ed from the same open
        names it, in any process."""
        writes = entry[1] and not entry[4]
        held = entry[2] in self.contents.by_handle
        if (writes or held) and not any(e is entry for table in self._all_tables() for e in table.values()):
            self.contents.closed(entry[2])
            if writes:
                self._emit("close", api="close", path=entry[0], handle=entry[2])

    def _all_tables(self) -> list:
        seen: dict = {id(self._root): self._root}
        for table in itertools.chain(self.tables.values(), self.gone,
                                     (b.table for b in itertools.chain(self.births.values(), self.named.values()) if b.table)):
            seen.setdefault(id(table), table)
        return list(seen.values())

    def _table_of(self, pid: str) -> dict:
        """The descriptor table of thread ``pid``; a task seen for the first time is tied to its birth
        (see _CLONES): its parent's table (shared, or a copy) and working folder."""
        table = self.tables.get(pid)
        if table is None:
            if pid in self.ended:  # an id used again, after pid_max wrapped: a new task
                self.ended.discard(pid)
                self.unsure_cwd.pop(pid, None)
                self.moved_cwd.discard(pid)
                self.guessed.discard(pid)
            birth = self.named.pop(pid, None)
            if birth is None and pid != self.first_pid and not self.blind and len(self.births) == 1:
                birth = next(iter(self.births.values()))
                self._unborn(birth)
            if pid == self.first_pid:
                table = self._root
                self.cwds[pid] = self._root_cwd
            elif birth is not None:
                birth.child = pid
                table, self.cwds[pid] = birth.table, birth.cwd
                if table is None:  # its clone has not returned: the parent is still where it was
                    table = self._child_table(birth.parent, birth.flags)
                    self.cwds[pid] = self._child_cwd(birth.parent, birth.flags)
            else:
                table = self._guess_birth(pid)
            self.tables[pid] = table
        return table

    def _guess_birth(self, pid: str) -> dict:
        """A task whose birth is one of several clones (or none the trace showed). Where every one of them
        would start it alike (one parent forking again and again, its table and folder unchanged between),
        which one it was does not matter: it starts as they all would. Else today's guess: the first
        unfinished clone's table, and a working folder of its own, so that its chdir moves no one else's,
        named again once the kernel names it (see unsure_cwd)."""
        parents = [p for p, text in self.pending.items() if text.startswith(_CLONE_OPENINGS)]
        alike = self._start(next(iter(self.births.values()))) \
            if len(self.births) > 1 and len(self.starts) == 1 else None
        if self.births:
            self.blind += 1
            if self.blind >= len(self.births):  # as many tasks as clones: every one has shown
                self.births, self.blind = {}, 0
                self.starts.clear()
        if alike is not None:
            (table, shared), (cwd, shared_fs) = alike
            self.cwds[pid] = cwd if shared_fs else [cwd[0]]
            return table if shared else dict(table)
        self.guessed.add(pid)
        self.cwds[pid] = [self.cwds.get(parents[0], self._root_cwd)[0] if len(parents) == 1 else self.last_cwd]
        self.unsure_cwd[pid] = []
        return self._root if not parents else self._child_table(parents[0], self.pending[parents[0]])

    def _start(self, birth: "_Birth") -> tuple:
        """((table, shared), (folder, shared)) a child of ``birth`` starts with."""
        files, fs = "CLONE_FILES" in birth.flags, bool(_CLONE_FS.search(birth.flags))
        if birth.table is not None:
            return (birth.table, files), (birth.cwd, fs)
        return (self.tables.get(birth.parent, self._root), files), (self.cwds.get(birth.parent, self._root_cwd), fs)

    def _shape(self, birth: "_Birth") -> tuple:
        """What ``birth`` starts its child with, as a value: two births of one shape start their children
        alike (the same folder, and the same table, or copies holding the same open files)."""
        (table, files), (cwd, fs) = self._start(birth)
        return (files, fs, cwd[0], id(cwd) if fs else None,
                id(table) if files else frozenset((fd, id(entry)) for fd, entry in table.items()))

    def _born(self, birth: "_Birth") -> None:
        """A clone started (or returned, printed whole): one more birth whose child has not shown."""
        birth.shape = self._shape(birth)
        self.starts[birth.shape] += 1
        self.births[id(birth)] = birth

    def _snapshot(self, birth: "_Birth") -> None:
        """The parent's table and folder as they are now are what the child of ``birth`` starts with."""
        birth.table, birth.cwd = self._child_table(birth.parent, birth.flags), self._child_cwd(birth.parent, birth.flags)
        if id(birth) in self.births:
            self._unborn(birth)
            self._born(birth)

    def _child_table(self, parent: str, flags: str) -> dict:
        table = self.tables.get(parent, self._root)
        return table if "CLONE_FILES" in flags else dict(table)

    def _child_cwd(self, parent: str, flags: str) -> list:
        box = self.cwds.get(parent, self._root_cwd)
        return box if _CLONE_FS.search(flags) else [box[0]]

    def _clone_started(self, pid: str, text: str) -> None:
        """A clone printed unfinished: its child may show before it returns."""
        if "CLONE_NEWPID" in text:
            self.namespaced = True
        self.cloning[pid] = birth = _Birth(pid, text)
        self._born(birth)

    def _clone_returned(self, pid: str, args: str, ret: str, line: str) -> None:
        birth = self.cloning.pop(pid, None)
        if "CLONE_NEWPID" in args:
            self.namespaced = True
        if ret.startswith("-") or ret == "?" and "ERESTART" in line or ret != "?" and int(ret, 0) == 0:
            # It made no child (failed, or to be started again: a new line then), or this is the child's
            # own side (0): no birth.
            if birth is not None and birth.child is None:
                self._unborn(birth)
            return
        if birth is None:
            birth = _Birth(pid, args)
            self._born(birth)
        if birth.child is None:
            # The child starts with the parent's table and folder as they are now (the parent was in the
            # clone until here); a task that takes this birth later starts from these.
            self._snapshot(birth)
        if ret != "?" and not self.namespaced:
            self._named(birth, str(int(ret, 0)))

    def _named(self, birth: "_Birth", child: str) -> None:
        """A clone's value names its child (strace's pid namespace is the only one in the trace)."""
        if birth.child is not None:
            return  # its child showed first, and was tied to it then
        if id(birth) in self.births:
            self._unborn(birth)
            if child in self.guessed:
                self.blind = max(0, self.blind - 1)
        if child not in self.guessed:
            if child not in self.tables:
                self.named[child] = birth
            return
        self.guessed.discard(child)
        birth.child = child
        if child in self.unsure_cwd:  # seen first, its parent unsure: now known
            started = birth.cwd[0]
            if child not in self.moved_cwd:
                self.cwds[child] = birth.cwd
            self._rename_guesses(child, started)

    def _unborn(self, birth: "_Birth") -> None:
        if self.births.pop(id(birth), None) is not None:
            self.starts[birth.shape] -= 1
            if not self.starts[birth.shape]:
                del self.starts[birth.shape]

    def _ended(self, pid: str, line: str) -> None:
        """``+++ exited ...``, ``+++ killed by ...``: the task is gone, and its id may be used again (its
        table is kept: what it held open is left as it was before exit lines were read)."""
        birth = self.cloning.pop(pid, None)
        if birth is not None and birth.child is None and birth.table is None:
            # Killed inside a clone: a child may have been made, with the table it has now.
            self._snapshot(birth)
        gone = re.match(r"\+\+\+ superseded by execve in pid (\d+)", line)
        if gone is not None:
            pid = gone.group(1)  # that thread now carries the caller's id; its own is free
        elif not line.startswith(("+++ exited", "+++ killed")):
            return
        table = self.tables.pop(pid, None)
        if table is not None:
            self.gone.append(table)
        self.cwds.pop(pid, None)
        self.ended.add(pid)

    def _moved(self, source: str, dest: str, exchange: bool = False) -> None:
        """A rename: a folder the trace saw made keeps being one under its new name (its insides too). With
        RENAME_EXCHANGE the two names trade what they are (a folder and a file traded, then traded back,
        must not leave the file taken for the folder)."""
        for made in (self.made_dirs, self.made_files):
            moved = {p for p in made if _under(p, source) or (exchange and _under(p, dest))}
            made -= moved
            made.discard(dest)  # what the rename replaced
            made |= {_after_rename(p, source, dest, exchange) for p in moved}

    def _cwds_moved(self, source: str, dest: str, exchange: bool) -> None:
        """A folder renamed (or traded with RENAME_EXCHANGE) takes the processes working in it, or below it, along:
        the kernel keeps a working folder by what it is, not by its name, so a relative path from there resolves
        under the new name (a truncate by a bare name in a checkpoint folder renamed aside hit the folder aside,
        where the trace, keeping the old name, looked in an empty one put in its place)."""
        # (a child whose clone has started but who has not shown yet starts in its birth's folder: moved too)
        births = itertools.chain(self.births.values(), self.named.values(), self.cloning.values())
        boxes = {id(b): b for b in [self._root_cwd, *self.cwds.values(), *(b.cwd for b in births if b.cwd is not None)]}
        for box in boxes.values():
            box[0] = _after_rename(box[0], source, dest, exchange)
        self.last_cwd = _after_rename(self.last_cwd, source, dest, exchange)

    def _is_dir(self, path: str, flags: str) -> Optional[bool]:
        """Whether an open's file is a folder: O_DIRECTORY says so; else, in the box's own folder (the same
        files inside and out), the judge looks; elsewhere (the box's own /tmp) it cannot, and says None."""
        if "O_DIRECTORY" in flags or path in self.made_dirs:
            return True
        if path in self.made_files:
            return False
        if path == self.root or path.startswith(self.root + os.sep):
            return os.path.isdir(path)
        return None

    def _mapped(self, args: str) -> None:
        if "MAP_SHARED" not in args:
            return  # a private map (every library and file Python loads) writes no file
        try:
            self._mmap(_split(args))
        except (ValueError, IndexError) as exc:
            self._tamper(f"a mmap line that could not be read ({exc})")

    def _mmap(self, args: list) -> None:
        """``mmap(addr, len, PROT_..., MAP_..., fd<path>, off)``: a shared, writable map of a file changes
        it with no system call the trace could show (a marker, refused on a watched file). A shared map made
        read-only from a descriptor open for writing counts too: mprotect (not traced) makes it writable."""
        if "MAP_SHARED" not in args[3] or ("<" not in args[4] and not args[4].strip().isdigit()):
            return  # no file (-1), or (_mapped looked for the word anywhere in the line) a private map
        fd, path = self._fd(args[4])
        entry = self.fds.get(fd)
        # A descriptor the trace never saw opened (passed over a socket) may be open for writing.
        if "PROT_WRITE" in args[2] or entry is None or entry[1]:
            self.contents.lost(handle=entry[2] if entry is not None else None, path=None if entry is not None else path)
            self._emit("mmap", api="mmap", path=entry[0] if entry is not None else path)

    def _call(self, pid: str, name: str, args: list, ret: int, ret_path: Optional[str]) -> None:
        """One successful system call, read into the operations and the descriptor table (:data:`_SYSCALLS`)."""
        handler = _SYSCALLS.get(name)
        if handler is not None:
            self._guesses = []
            self._unresolved = None
            handler(self, _Syscall(pid, name, args, ret, ret_path))
            if self._unresolved is not None:
                self._emit("proc", api=name, path=self._unresolved)

    def _at(self, c: "_Syscall", dirfd: int) -> str:
        """The path argument after the folder descriptor ``args[dirfd]`` (the ``*at`` calls)."""
        return self._path(c.pid, c.args[dirfd + 1], c.args[dirfd])

    def _fd(self, arg: str) -> tuple:
        """``_annotation``, with the path of a descriptor strace printed bare taken from the table; one the table
        does not hold either is a file no account can name: the call is refused (see _refusal)."""
        fd, path = _annotation(arg)
        if not path and fd >= 0:
            entry = self.fds.get(fd)
            if entry is not None:
                return fd, entry[0]
            self._unresolved = f"<descriptor {fd}, whose file strace could not name>"
        return fd, path

    def _fd_target(self, arg: str) -> tuple:
        """A descriptor argument's (path it was opened at, handle), or what strace names it and None."""
        fd, path = self._fd(arg)
        entry = self.fds.get(fd)
        return (entry[0], entry[2]) if entry else (path, None)

    def _open(self, c: "_Syscall") -> None:
        path = os.fsdecode(_unescape(c.ret_path)) if c.ret_path else ""
        if not path:
            # strace names the new descriptor's file as the kernel does, and cannot when its path is longer than
            # the kernel names whole (4,096 bytes): then the file is the one the path given resolves to. (Named "",
            # an O_TRUNC open of a second name of the checkpoint there emptied it unseen.)
            path = self._path(c.pid, c.args[0]) if c.name in ("open", "creat") else self._at(c, 0)
        if self.name in path:
            # The trace has no name: only a descriptor's link under /proc/<pid>/fd reopens it.
            self._tamper("it opened the trace itself through /proc")
        flags = "O_WRONLY|O_CREAT|O_TRUNC" if c.name == "creat" else c.args[1 if c.name == "open" else 2]
        writable = any(f in flags for f in _WRITE_FLAGS)
        handle = next(_HANDLES)
        # A folder cannot be opened to write, created or emptied (EISDIR): such an open's file is no folder, and
        # its name is a file's until the trace sees it removed or replaced.
        is_dir = False if any(f in flags for f in _NOT_A_FOLDER) else self._is_dir(path, flags)
        if is_dir is False and "O_CREAT" in flags and _nameless(path) == path:
            self.made_files.add(path)
        self._opened(c.ret, [path, writable, handle, None if "O_APPEND" in flags else 0, is_dir, len(self.renamed)])
        self.contents.opened(path, handle, flags, is_dir)
        if writable and not is_dir:
            self._emit("open", api=c.name, path=path, handle=handle,
                       flags=frozenset(v for k, v in _OPEN_FLAGS.items() if k in flags))

    def _dup(self, c: "_Syscall") -> None:
        if c.name == "fcntl" and not c.args[1].startswith("F_DUPFD"):
            return
        entry = self.fds.get(_annotation(c.args[0])[0])
        if entry is not None:
            self._opened(c.ret, entry)
        else:
            # A copy of a descriptor the trace never saw opened (a memfd, a pipe, open_tree's O_PATH): the number
            # no longer names what it named (dup2 over it closed that), and what it names now is unknown, as for
            # one received from another process. Kept, an fsync through it was credited to the old file (a memfd
            # dup2()ed over the temp file's number), and /proc/self/fd/<it> read as the old folder.
            self._closed(c.ret)

    def _write(self, c: "_Syscall") -> None:
        fd, path = self._fd(c.args[2] if c.name == "copy_file_range" else c.args[0])
        if path == self.pipe:
            self.wire += c.ret
            return
        if self.name in path:
            self._tamper("it wrote into the kernel trace itself")
        if not path.startswith("/") or _device(path):
            return  # a pipe, a socket, a terminal: nothing a crash leaves on disk
        data, cut = _WRITTEN[c.name](c.args)
        entry = self.fds.get(fd)
        if c.name in _COPY_SOURCE:
            copied = self._copied_bytes(c)
            if copied is not None:
                data, cut = copied, False
        lost = entry is not None and entry[3] is LOST and not (c.name == "pwritev2" and "RWF_APPEND" in c.args[-1])
        offset = self._write_offset(c, entry)
        if entry is None:
            self.contents.lost(path=path)  # a descriptor the trace never saw opened (passed over a socket)
        elif offset < 0 and lost:
            self.contents.lost(handle=entry[2])
        else:
            self.contents.wrote(entry[2], offset if offset >= 0 else self.contents.at_end(entry[2]), data[:c.ret],
                                not cut and len(data) >= c.ret)
        # Named by the path it was opened at (the recorder's convention too): the handle says which
        # file it is, whatever it has been renamed to since.
        flags = {"cut"} if cut else set()
        if offset < 0 and (entry is None or lost):
            flags.add(UNPLACED)  # where it lands is a position the trace cannot know
        if c.name == "pwritev2" and ("RWF_DSYNC" in c.args[-1] or "RWF_SYNC" in c.args[-1]):
            flags.add("sync")  # durable on return, as every write to a file opened with O_SYNC
        if c.name == "pwritev2" and _rwf_noappend(c.args[-1]) and entry is not None and entry[3] is None:
            # RWF_NOAPPEND (Linux 6.9): this write lands at its offset though the descriptor appends, which the
            # crash models (an appending open's writes land at the end) do not follow
            self._emit("append_off", api=c.name, path=entry[0], handle=entry[2])
        self._emit("write", api=c.name, path=entry[0] if entry else path, handle=entry[2] if entry else None,
                   offset=offset, data=data[:c.ret], size=c.ret, flags=frozenset(flags))

    def _copied_bytes(self, c: "_Syscall") -> Optional[bytes]:
        """The bytes an in-kernel copy moved, read from what the trace says its source holds (None:
        it cannot say). The source's position moves as the kernel moves it, unless an offset was given."""
        at, offset_at = _COPY_SOURCE[c.name]
        entry = self.fds.get(_annotation(c.args[at])[0])
        if entry is None:
            return None
        given = _given_offset(c.args[offset_at])
        if given is not None:
            return self.contents.copied(entry[2], given, c.ret)
        # From the descriptor's position, which reads (not traced) may have moved: trusted only for a
        # whole file copied from its start in one call, as cp does; a read before it would make the
        # copy shorter than the file.
        offset, size = entry[3], self.contents.size(entry[2])
        if entry[3] is not None and entry[3] is not LOST:
            entry[3] += c.ret
        if c.ret == 0:
            return b""
        return self.contents.copied(entry[2], 0, c.ret) if offset == 0 and size == c.ret else None

    def _write_offset(self, c: "_Syscall", entry: Optional[list]) -> int:
        """Where a write lands: a pwrite's own offset; else the descriptor's position, which the write
        moves (pwritev2's offset -1 means that too); -1 when the position is unknown (at the end)."""
        at = _OFFSET_ARG.get(c.name)
        given = _given_offset(c.args[3]) if c.name == "copy_file_range" else None
        if given is not None:
            return given  # its own offset: the position stays
        offset = -1 if at is None else int(c.args[at])
        if c.name == "pwritev2" and "RWF_APPEND" in c.args[-1]:
            if offset == -1 and entry is not None and entry[3] is not None:
                # From the position: the kernel moves it to the file's new end, a number the trace may not know.
                # The descriptor does not append from now on (its next write lands there, or wherever an lseek
                # puts it): taken for an appending one, a seek back to 0 was not followed, and spaces written
                # over the checkpoint looked like spaces after it.
                entry[3] = LOST
            return -1  # at the end whatever offset it names
        if offset == -1 and (at is None or c.name == "pwritev2") and entry is not None and entry[3] is LOST:
            return -1  # where a write from an unknown position lands (see _write: refused in a watched folder)
        if offset == -1 and (at is None or c.name == "pwritev2") and entry is not None and entry[3] is not None:
            offset = entry[3]
            entry[3] += c.ret
        return offset

    def _fsync(self, c: "_Syscall") -> None:
        fd, path = self._fd(c.args[0])
        entry = self.fds.get(fd)
        is_dir = entry[4] if entry is not None else self._is_dir(path, "")
        # Outside the box's folder only the recorder can say whether it was a folder (a label: the
        # file it names is the kernel's, and no fsync of a folder makes a file durable).
        self._emit("fsync", api=c.name, path=entry[0] if entry else path, handle=entry[2] if entry else None,
                   is_dir=bool(is_dir), flags=frozenset({UNSURE}) if is_dir is None else frozenset())

    def _ftruncate(self, c: "_Syscall") -> None:
        path, handle = self._fd_target(c.args[0])
        self.contents.truncated(int(c.args[1]), handle=handle, path=path)
        self._emit("truncate", api=c.name, path=path, handle=handle, size=int(c.args[1]))

    def _truncate(self, c: "_Syscall") -> None:
        path = self._path(c.pid, c.args[0])
        self.contents.truncated(int(c.args[1]), path=path)
        self._emit("truncate", api=c.name, path=path, size=int(c.args[1]))

    def _rename_or_link(self, c: "_Syscall") -> None:
        source, dest = self._path(c.pid, c.args[0]), self._path(c.pid, c.args[1])
        self._renamed_or_linked(c, source, dest)

    def _rename_or_link_at(self, c: "_Syscall") -> None:
        raw = os.fsdecode(_string(c.args[1])[0])
        by_fd = _PROC_FD.match(os.path.normpath(raw)) if c.name == "linkat" else None
        fd = int(by_fd.group(1)) if by_fd else None
        if c.name == "linkat" and raw == "" and "AT_EMPTY_PATH" in c.args[-1]:
            fd = _annotation(c.args[0])[0]  # linkat(fd, "", ..., AT_EMPTY_PATH): the descriptor's own file
        if fd is not None and fd in self.fds:
            # linkat of an open (O_TMPFILE) file by descriptor: the handle says which file
            entry = self.fds[fd]
            self.contents.linked(entry[2], self._at(c, 2))
            self._emit("link", api=c.name, path=entry[0], dest=self._at(c, 2), handle=entry[2],
                       flags=frozenset({"tmpfile"}) if _nameless(entry[0]) != entry[0] else frozenset())
            return
        self._renamed_or_linked(c, self._at(c, 0), self._at(c, 2))

    def _renamed_or_linked(self, c: "_Syscall", source: str, dest: str) -> None:
        kind = "rename" if c.name.startswith("rename") else "link"
        if kind == "rename" and any(_under(self.root, name) for name in (source, dest)):
            # A folder above the box's own folder (on the box's private /tmp, where the folder is bound at its path
            # outside): moved, every file in the box's folder is named by another path for a while, one the
            # judge, outside, never reads (an in-place truncate through it earned 10). No correct save does so.
            self._unresolved = source
        # renameat2 with RENAME_EXCHANGE trades the two names' files: both stay (the replay swaps them)
        flags = frozenset({"exchange"}) if c.name == "renameat2" and "RENAME_EXCHANGE" in c.args[-1] else frozenset()
        if kind == "rename":
            self._moved(source, dest, exchange=bool(flags))
            if len(self.renamed) < MAX_OPS:  # (past that, the run is refused anyway)
                self.renamed.extend((source, dest) if flags else (source,))
        if kind == "rename" and source != dest:
            self._cwds_moved(source, dest, exchange=bool(flags))
        if flags:
            self.contents.lost(path=source)  # two names traded: neither is followed from here
            self.contents.lost(path=dest)
        else:
            self.contents.renamed(source, dest, link=kind == "link")
        self._emit(kind, api=c.name, path=source, dest=dest, flags=flags)

    def _name_changed(self, c: "_Syscall") -> None:
        """unlink, rmdir, mkdir and their ``*at`` forms (unlinkat with AT_REMOVEDIR is an rmdir)."""
        at = c.name.endswith("at")
        path = self._at(c, 0) if at else self._path(c.pid, c.args[0])
        base = c.name[:-2] if at else c.name
        (self.made_dirs.add if base == "mkdir" else self.made_dirs.discard)(path)
        self.made_files.discard(path)
        if base != "mkdir":
            self.contents.removed(path)
        kind = "rmdir" if c.name == "unlinkat" and "AT_REMOVEDIR" in c.args[2] else base
        self._emit(kind, api=c.name, path=path)

    def _symlink(self, c: "_Syscall") -> None:
        path = self._path(c.pid, c.args[-1], c.args[1] if c.name == "symlinkat" else None)
        if path.startswith(self.root + os.sep):
            self.links = True  # (bubblewrap's own links, made as the box starts, are elsewhere)
        self.contents.forget()
        self._emit("symlink", api=c.name, path=path)

    def _sync(self, c: "_Syscall") -> None:
        if c.name == "syncfs":
            # syncfs flushes only the file system that holds its descriptor's file: the box's own folder (the
            # checkpoints' file system) or another one (the box's /tmp, /dev), which makes nothing here durable.
            path = _annotation(c.args[0])[1]
            if path != self.root and not path.startswith(self.root + os.sep):
                return
        self._emit("sync", api=c.name)

    def _chdir(self, c: "_Syscall") -> None:
        self._moved_to(c.pid, self._path(c.pid, c.args[0]))

    def _fchdir(self, c: "_Syscall") -> None:
        self._moved_to(c.pid, _annotation(c.args[0])[1])

    def _moved_to(self, pid: str, folder: str) -> None:
        if folder == "/proc" or folder.startswith("/proc/"):
            # A folder of /proc that no link of it led out of (/proc/self/fd, /proc/self): the kernel resolved
            # "self" to the mover, so a relative name from there means the mover's descriptors even in a child
            # that has other ones (a child's "3/checkpoint.json" went through its parent's 3). Not followed.
            self._unresolved = folder
        self.cwds.get(pid, self._root_cwd)[0] = self.last_cwd = folder
        self._guesses = []  # a relative chdir names no operation
        if pid in self.unsure_cwd:
            self.moved_cwd.add(pid)

    def _unshare(self, c: "_Syscall") -> None:
        """unshare(CLONE_FS) gives a thread a working folder of its own; unshare(CLONE_FILES), a table."""
        if _CLONE_FS.search(c.args[0]):
            self.cwds[c.pid] = [self.cwds.get(c.pid, self._root_cwd)[0]]
        if "CLONE_FILES" in c.args[0]:
            self.tables[c.pid] = self.fds = dict(self.fds)

    def _close_range(self, c: "_Syscall") -> None:
        """``close_range(first, last, flags)``: every descriptor from first to last is closed (with
        CLOSE_RANGE_UNSHARE, in a table of the process's own; CLOSE_RANGE_CLOEXEC closes none now)."""
        if "CLOSE_RANGE_UNSHARE" in c.args[2]:
            self.tables[c.pid] = self.fds = dict(self.fds)
        if "CLOSE_RANGE_CLOEXEC" in c.args[2]:
            return
        # (an older strace prints the first and last as descriptors, "3</path>": the number leads either way)
        first, last = (int(_LEADING_INT.match(a.strip()).group(0), 0) if _LEADING_INT.match(a.strip()) else int(a, 0)
                       for a in c.args[:2])
        for fd in [fd for fd in self.fds if first <= fd <= last]:
            self._closed(fd)

    def _passed(self, c: "_Syscall") -> None:
        """Descriptors handed over a Unix socket (SCM_RIGHTS): a sent one is the sender's open file, and the
        descriptor that receives it shares that file and its position, whatever its number named before."""
        body = ", ".join(c.args)
        if "SCM_RIGHTS" not in body:
            return
        # The bytes sent are printed too, as a quoted string: text in them that reads like SCM_RIGHTS
        # must not hand a descriptor over, so every string is blanked first (a path in <...> is kept).
        body = _STRINGS.sub(lambda m: m.group(0) if m.group(0)[0] == "<" else '""', body)
        for rights in _RIGHTS.finditer(body):
            for m in _ANNOTATED.finditer(rights.group(1)):
                fd, path = int(m.group(1)), os.fsdecode(_unescape(m.group(2)))
                if c.name == "sendmsg":
                    if len(self.in_flight) < 256 and self.fds.get(fd) is not None:
                        self.in_flight.append((path, self.fds.get(fd)))
                    continue
                sent = next((i for i, (p, e) in enumerate(self.in_flight) if p == path and e is not None), None)
                if sent is None:
                    self._closed(fd)  # a file the trace cannot name: written through as one never seen opened
                else:
                    self._opened(fd, self.in_flight.pop(sent)[1])

    def _got_fd(self, c: "_Syscall") -> None:
        """``pidfd_getfd``: another process's descriptor (its table is not one the trace can name), copied in."""
        self._closed(c.ret)

    def _splice(self, c: "_Syscall") -> None:
        """``splice(fd_in, off_in, fd_out, off_out, len, flags)``: bytes moved from a pipe inside the kernel,
        which strace does not print. Into a file, a write of unknown bytes (see :func:`unknown_bytes`)."""
        fd, path = _annotation(c.args[2])
        if path == self.pipe:
            self.wire += c.ret
            return
        if not path.startswith("/") or _device(path):
            return
        entry = self.fds.get(fd)
        self.contents.lost(handle=entry[2] if entry is not None else None, path=None if entry is not None else path)
        offset = _given_offset(c.args[3])
        if offset is None:
            offset = entry[3] if entry is not None and entry[3] is not None and entry[3] is not LOST else -1
            if offset >= 0:
                entry[3] += c.ret
        self._emit("write", api=c.name, path=entry[0] if entry else path, handle=entry[2] if entry else None,
                   offset=offset, data=b"", size=c.ret, flags=frozenset({"cut"}))

    # -- the judge's questions -----------------------------------------------------------------
    def seed(self, roots: Iterable[str]) -> None:
        """Before a call: the files the watched folders hold, as the judge reads them, for the copies the code
        may make of them inside the kernel (the checkpoint an earlier run or the judge left there, copied aside
        with shutil or cp). What the trace already follows is taken again where the file now holds other bytes
        (the judge lays crash states out between calls); the trace is read up to now first, so nothing the box
        did before this moment is applied again. Regular files only, never through a link."""
        self._read()
        # Each folder is opened from its parent's descriptor without following a link, so a folder the box
        # swaps for a link to elsewhere while the judge walks never leads the judge out of the box's folder;
        # and the walk reads a bounded number of names.
        budget = [_SEED_NAMES]
        for root in roots:
            try:
                top = os.open(os.path.realpath(root), os.O_RDONLY | os.O_DIRECTORY)
            except OSError:
                continue
            stack = [(top, os.path.realpath(root))]
            try:
                while stack:
                    fd, folder = stack.pop()
                    try:
                        if not self._seed_folder(fd, folder, stack, budget):
                            return
                    finally:
                        os.close(fd)
            finally:
                for fd, _ in stack:
                    os.close(fd)

    def _seed_folder(self, fd: int, folder: str, stack: list, budget: list) -> bool:
        """One folder of :meth:`seed`: its files taken, its subfolders pushed; False when the walk must stop."""
        try:
            with os.scandir(fd) as entries:
                found = list(itertools.islice(entries, budget[0] + 1))
        except OSError:
            return True
        budget[0] -= len(found)
        if budget[0] < 0:
            return False
        for entry in found:
            path = os.path.join(folder, entry.name)
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd), path))
                    continue
                if not entry.is_file(follow_symlinks=False) or _left_out(path):
                    continue
                one = os.open(entry.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
            except OSError:
                continue
            try:
                if not stat.S_ISREG(os.fstat(one).st_mode):
                    continue
                data = os.read(one, HELD_CAP + 1) if os.fstat(one).st_size <= HELD_CAP else None
            finally:
                os.close(one)
            if data is None or not self.contents.seeded(path, data):
                return False
        return True

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

    def settle(self, recorded: Iterable[Any], wire_bytes: int, watch: Iterable[str], since: int = 0,
               keep: Optional[Callable[[Op], Op]] = None) -> Optional[str]:
        """Hand the judge the kernel's operations up to one of the worker's messages, labelled by the
        recorder's operations sent with it (``recorded``); returns why the run cannot be trusted, or None.

        ``wire_bytes``: how many bytes the judge had read from the worker when that message ended.
        ``since``: where the recorded call began on the pipe; what the kernel saw before it belongs to
        calls made without a recorder, and is dropped. ``keep(op)`` stores one operation where the crash
        states are built from (the judge's recorder) and returns the stored one: every operation the
        kernel saw, in its order, goes there, whether or not the recorder saw it. A recorded operation
        may come in a later message than the kernel's (a thread racing the message), so the kernel's
        operations no recorded one has claimed wait for one until the call ends (:attr:`pool`).
        """
        if not self.catch_up(wire_bytes):
            return (f"{MISMATCH}: " + (f"the trace was interfered with ({self.tampered})" if self.tampered else
                                       "the trace of your process stopped before its last message to the grader"))
        if self.tampered:
            return f"{MISMATCH}: the trace was interfered with ({self.tampered})"
        self.take(since)
        if self.pool_since != since:
            self.pool, self.pool_since = [], since
        roots = [os.fspath(w) for w in watch]
        fresh, problem = translate(self.take(wire_bytes), roots)
        stored = {id(op): (keep(op) if keep is not None else op) for op in fresh}
        # This message's own operations first: the worker's words come with the message after their call
        # (grader.grading.worker), so one naming a file saved again and again is this message's.
        claimable = [op for op in fresh if claimable_by_recorder(op, roots)] + self.pool
        forged, unclaimed = label([op for op in recorded if isinstance(op, Op)], claimable, roots)
        _python_words(fresh, self.opened_by)
        # keep() stored copies of the fresh operations before label() named them: the copies take the labels.
        for op in fresh:
            copy = stored[id(op)]
            if copy is not op:
                copy.api, copy.flags, copy.data, copy.offset = op.api, op.flags, op.data, op.offset
        # Later labels must reach what keep() stored.
        self.pool = [stored.get(id(op), op) for op in unclaimed
                     if op.kind in _WORDED or (op.kind == "write" and "cut" in op.flags)]
        return problem or forged


class _Syscall(NamedTuple):
    """One successful system call as strace printed it: its thread, name, arguments and result."""

    pid: str
    name: str
    args: list
    ret: int
    ret_path: Optional[str]  # what a returned descriptor names (strace -y)


# Calls a task killed inside may have done in part or whole (see KernelTrace._no_result): copies inside the kernel
# are left out (their bytes are unknown either way), and so is splice.
_DIED_INSIDE = frozenset({"write", "pwrite64", "writev", "pwritev", "pwritev2", "open", "openat", "creat",
                          "ftruncate", "truncate", "rename", "renameat", "renameat2", "link", "linkat", "unlink",
                          "unlinkat", "mkdir", "mkdirat", "rmdir"})


def _requested(parts: list, name: str) -> int:
    """A write's requested length, where strace printed fewer of its bytes: its count argument (writev's is the
    number of buffers, not of bytes: then what was printed)."""
    return int(parts[2]) if name in ("write", "pwrite64") else len(_WRITTEN[name](parts)[0])


# Calls read from their whole line (and only when they succeeded): reads, printed raw, and execs.
_WHOLE_LINE = {"read": KernelTrace._read_moved, "readv": KernelTrace._read_moved,
               "execve": KernelTrace._exec, "execveat": KernelTrace._exec}
# What each system call does to the operations or the descriptor table (the others change nothing).
_SYSCALLS = {
    **dict.fromkeys(_OPENS, KernelTrace._open),
    **dict.fromkeys(_DUPS, KernelTrace._dup),
    **dict.fromkeys(_WRITES, KernelTrace._write),
    "fsync": KernelTrace._fsync, "fdatasync": KernelTrace._fsync,
    "ftruncate": KernelTrace._ftruncate, "truncate": KernelTrace._truncate,
    "rename": KernelTrace._rename_or_link, "link": KernelTrace._rename_or_link,
    "renameat": KernelTrace._rename_or_link_at, "renameat2": KernelTrace._rename_or_link_at,
    "linkat": KernelTrace._rename_or_link_at,
    **dict.fromkeys(("unlink", "rmdir", "mkdir", "unlinkat", "mkdirat"), KernelTrace._name_changed),
    "symlink": KernelTrace._symlink, "symlinkat": KernelTrace._symlink,
    "sync": KernelTrace._sync, "syncfs": KernelTrace._sync,
    "chdir": KernelTrace._chdir, "fchdir": KernelTrace._fchdir, "unshare": KernelTrace._unshare,
    "splice": KernelTrace._splice, "close_range": KernelTrace._close_range,
    **dict.fromkeys(("sendmsg", "recvmsg", "recvmmsg"), KernelTrace._passed), "pidfd_getfd": KernelTrace._got_fd,
}
# The descriptors an SCM_RIGHTS message carries, as strace -y prints them: cmsg_data=[5</path>, 6</path>]
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|<(?:[^>\\]|\\.)*>')  # a quoted string, or a path strace -y names
_RIGHTS = re.compile(r"cmsg_type=SCM_RIGHTS, cmsg_data=\[((?:\d+<(?:[^>\\]|\\.)*>(?:\(deleted\))?(?:, )?)*)\]")
_ANNOTATED = re.compile(r"(\d+)<((?:[^>\\]|\\.)*)>")

# The bytes each write call carries, and whether strace printed fewer than were written.
_WRITTEN = {
    "write": lambda args: _string(args[1]), "pwrite64": lambda args: _string(args[1]),
    "writev": lambda args: _iovecs(args[1]), "pwritev": lambda args: _iovecs(args[1]),
    "pwritev2": lambda args: _iovecs(args[1]),
    # Copied inside the kernel: strace prints none of the bytes.
    "sendfile": lambda args: (b"", True), "copy_file_range": lambda args: (b"", True),
}
# An in-kernel copy's source: (its descriptor's argument, its offset's argument: NULL for the position).
_COPY_SOURCE = {"sendfile": (1, 2), "copy_file_range": (0, 1)}
# Where a positioned write's offset argument is (the others write at the descriptor's position).
_OFFSET_ARG = {"pwrite64": -1, "pwritev": -1, "pwritev2": -2}
# An open's flags as the replay names them.
_OPEN_FLAGS = {"O_CREAT": "create", "O_TRUNC": "trunc", "O_APPEND": "append", "O_EXCL": "excl",
               "O_SYNC": "sync", "O_DSYNC": "sync", "O_TMPFILE": "tmpfile"}


# -- the kernel's account, labelled ----------------------------------------------------------------

# A Python-level name the recorder may give an operation (os.replace, write, pathlib...): anything else
# it sends is not shown to a learner.
_API = re.compile(r"^[A-Za-z_][\w.]{0,39}$")


def _under(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or names something inside it."""
    return path == folder or path.startswith(folder + os.sep)


def _after_rename(path: str, source: str, dest: str, exchange: bool = False) -> str:
    """``path``'s name once ``source`` was renamed to ``dest`` (or, with RENAME_EXCHANGE, the two traded)."""
    for old, new in ((source, dest), (dest, source)) if exchange else ((source, dest),):
        if _under(path, old):
            return new + path[len(old):]
    return path


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


# (A link through another process's /proc/<pid>/fd is not this one: its path goes through _through_proc, which
# refuses what it cannot name.)
_SEED_NAMES = 20_000  # names one seed() may read in the watched folders (a box could make millions)
_LEADING_INT = re.compile(r"0x[0-9a-f]+|-?\d+")
_PROC_FD = re.compile(r"^/(?:proc/(?:self|thread-self)|dev)/fd/(\d+)$")
# /dev's links into /proc/self/fd (made by bubblewrap in the box, as by udev on a machine): name -> fd
_STD_FDS = {"fd": "", "stdin": "0", "stdout": "1", "stderr": "2"}
# A file with no name yet: the recorder's placeholder, or the kernel's `/dir/#inode`.
_NAMELESS = re.compile(r"^(?:\.O_TMPFILE-\d+|#\d+)$")


def _nameless(path: Optional[str]) -> Optional[str]:
    if path and _NAMELESS.match(os.path.basename(path)):
        return os.path.join(os.path.dirname(path), "(a file with no name)")
    return path


def _device(path: str) -> bool:
    """A device, not a file (/dev/shm, though under /dev, holds ordinary files)."""
    return path.startswith("/dev/") and not path.startswith("/dev/shm/")


def _rwf_noappend(arg: str) -> bool:
    """Whether pwritev2's flags hold RWF_NOAPPEND (0x20), by name or, where strace does not know it, by number."""
    if "RWF_NOAPPEND" in arg:
        return True
    for word in arg.split("/*")[0].split("|"):
        word = word.strip()
        if word.startswith("0x"):
            try:
                return bool(int(word, 16) & 0x20)
            except ValueError:
                return False
    return False


def _given_offset(arg: str) -> Optional[int]:
    """A copy's or splice's own offset argument: ``[6]`` (or ``[6] => [9]``, as sendfile prints it), else
    None (NULL: the descriptor's position)."""
    arg = arg.strip()
    return int(arg[1:arg.index("]")]) if arg.startswith("[") else None


def _left_out(path: Optional[str]) -> bool:
    """Files no crash state holds: byte-code caches, devices (but /dev/shm holds ordinary files), and files
    made by memfd_create, which live in memory only and have no name on any disk (a learner's code may
    make one; the recorder, where it patches, passes a forked child's operations on through one)."""
    return path is not None and ("__pycache__" in path or path.endswith((".pyc", ".pyo")) or path.startswith("/memfd:")
                                 or _device(path))


def translate(kernel: list, roots: list) -> tuple[list, Optional[str]]:
    """The kernel's operations as the judge names them, and why the run cannot be graded (or None).

    ``roots``: the watched folders as the judge names them (it may reach them through a link; the
    kernel names them by their real path). A path inside one is renamed back to the judge's name;
    others keep the kernel's. Byte-code caches and devices are left out; a marker (:data:`MARKERS`)
    becomes the reason: a file in a watched folder written through a shared memory map, a symbolic
    link made there, or any use of io_uring.
    """
    pairs = [(os.path.realpath(r), r) for r in roots]
    real_roots = [r for r, _ in pairs]

    def judge_name(path: Optional[str]) -> Optional[str]:
        if path is None:
            return None
        for real, given in pairs:
            if path == real or path.startswith(real + os.sep):
                return given + path[len(real):]
        return path

    out, problem = [], None
    for op in kernel:
        if op.kind in MARKERS:
            if problem is None and (op.kind in REFUSED_ANYWHERE or _inside(op.path, real_roots)):
                problem = _refusal(op, judge_name(op.path))
            continue
        if _left_out(op.path) or _left_out(op.dest):
            continue
        op.path, op.dest = judge_name(op.path), judge_name(op.dest)
        out.append(op)
    return out, problem


def _refusal(op: Op, path: Optional[str]) -> str:
    name = short_name(path)
    if op.kind == "mmap":
        return (f"your code mapped {name} into memory for writing (mmap with MAP_SHARED, or shared from a "
                "descriptor open for writing, which mprotect can make writable): bytes stored there "
                "reach the file with no system call, so the grader cannot tell when they land or rebuild what a "
                "crash would leave, and it does not grade such a run. Write the checkpoint with write() calls")
    if op.kind == "append_off":
        how = ("turned O_APPEND off (fcntl F_SETFL) on a descriptor of" if op.api == "fcntl" else
               f"wrote with {op.api} and RWF_NOAPPEND through a descriptor of")
        return (f"your code {how} {name} opened to append: its writes then land where it says, not at the end, "
                "which the grader does not follow for an appending file, so it cannot rebuild what a crash would "
                "leave, and it does not grade such a run. Open the file without O_APPEND to write in place, or "
                "keep appending")
    if op.kind == "proc" and (op.path or "").startswith("<descriptor "):
        return (f"your code used a descriptor with {op.api} whose file the kernel could not name (its path is longer "
                "than the kernel names whole, 4,096 bytes), and that the grader never saw opened: it cannot tell "
                "which file that is, so it cannot rebuild what a crash would leave, and it does not grade such a run. "
                "Keep the checkpoint's paths short")
    if op.kind == "proc" and op.api.startswith("rename"):
        return (f"your code renamed {op.path}, a folder above the folder the grader gave it: while it is moved, "
                "every file there goes by another name, which the grader cannot follow, so it cannot rebuild what a "
                "crash would leave, and it does not grade such a run. Keep to the folders your code makes")
    if op.kind == "proc" and op.api in ("chdir", "fchdir"):
        return (f"your code moved into {op.path} with {op.api}: names relative to a folder of /proc mean one "
                "process's descriptors or folders, whichever process uses them, and the grader cannot tell which "
                "file such a name reaches, so it cannot rebuild what a crash would leave, and it does not grade such a "
                "run. Name files by their own paths")
    if op.kind == "proc":
        return (f"your code gave {op.api} the path {op.path}, through a link in /proc into another process or to a "
                "descriptor the grader never saw opened: the grader cannot tell which file that names, so it "
                "cannot rebuild what a crash would leave, and it does not grade such a run. Name files by their "
                "own paths")
    if op.kind == "symlink":
        return (f"your code made a symbolic link, {name}, in the checkpoint folder: the crash models do not "
                "follow links, so the grader does not grade such a run. Save plain files")
    return ("your code set up io_uring, which changes files with no system call the grader can trace, so it "
            "does not grade such a run. Use ordinary write, fsync and rename calls")


def unknown_bytes(ops: Iterable[Op], roots: list) -> Optional[str]:
    """Why a run cannot be graded when bytes the trace did not carry landed in a watched folder, or None.

    ``sendfile``, ``copy_file_range`` and ``splice`` copy inside the kernel: strace prints how many bytes
    but not which. One from a file the trace can account for (written by the code, or in a watched folder
    before the call) has them (:class:`_Contents`); any other leaves a write the crash states cannot rebuild (the replay would keep the old bytes there, and
    only the final files could be compared with the disk), so the run is refused, with why."""
    for op in ops:
        if op.kind == "write" and UNPLACED in op.flags and op.size and _inside(op.path, roots):
            return (f"your code wrote {op.size} bytes to {short_name(op.path)} with {op.api} from a position the "
                    "grader cannot know, through a descriptor the grader never saw opened (taken from another process "
                    "with pidfd_getfd, or kept open across an exec) or one a pwritev2 with RWF_APPEND moved to the file's end: it cannot tell "
                    "where in the file they landed, so it cannot rebuild what a crash would leave there, and it "
                    "does not grade such a run. Write the checkpoint through files your code opens itself, and "
                    "say where with lseek")
        if op.kind == "write" and "cut" in op.flags and op.size and _inside(op.path, roots):
            return (f"your code wrote {op.size} bytes to {short_name(op.path)} with {op.api}, which copies them "
                    "inside the kernel: the grader's trace counts those bytes but cannot see which they are, so it "
                    "cannot rebuild what a crash would leave there, and it does not grade such a run. Write the "
                    "checkpoint with write() calls (a copy of a file your code wrote itself, or of one the folder held "
                    "when the call began, with shutil, os.sendfile or cp, is followed)")
    return None


def claimable_by_recorder(op: Op, roots: list) -> bool:
    """Whether a recorded operation could be this one: the kinds compared, in a watched folder (or sync)."""
    return op.kind in COMPARED and not (op.kind == "write" and not op.data and not op.size) \
        and (op.kind == "sync" or _inside(op.path, roots) or _inside(op.dest, roots))


def label(recorded: list, kernel: list, roots: list) -> tuple[Optional[str], list]:
    """Give the kernel's operations the recorder's labels: returns why a recorded one is forged (or
    None), and the operations of ``kernel`` no recorded one claimed.

    Each recorded operation in a watched folder (or ``os.sync()``) must be one the kernel saw: the
    first of ``kernel`` not yet claimed of the same kind that names the same file (its folders' links
    followed; a file with no name yet matches the recorder's placeholder), or failing that the first of
    the same kind (and, for a write, the same size): the two accounts may name a file differently (a
    descriptor's file renamed while open) or order two calls differently (threads), and the kernel is
    right. A recorded operation with no such counterpart is refused as forged. The labels are only
    words: the Python function that made the call (``os.replace``), whether the file existed before an
    open. Never bytes: words come from the box, where the code can raise shutil's audit event or edit
    the recorder (a copy's bytes come from the trace's own account, or stay unknown). What the kernel saw that the recorder
    did not is kept as it is, named by its system call.
    """
    cache: dict = {}
    mine = [op for op in recorded if claimable_by_recorder(op, roots) or (op.kind in COMPARED and (
        _inside(_real(op.path, cache), roots) or _inside(_real(op.dest, cache), roots)))]
    free = list(kernel)
    for op in mine:
        if op.kind == "write" and not op.data and not op.size:
            continue
        match = _counterpart(op, free, cache)
        if match is None and op.kind == "write" and op.api in COPIES:
            continue  # the bytes of a copy the kernel made in pieces: only words, which name none of them
        if match is None:
            return f"{MISMATCH}: the recorded operations include {_told(op)}, which the kernel never saw", free
        free.remove(match)
        _take_labels(match, op)
    return None, free


# The kinds of operation the worker has words for (grader.grading.worker): a kernel operation of another
# kind that no word claimed in its own message never will.
_WORDED = frozenset({"open", "rename", "link", "unlink", "mkdir", "rmdir"})


def _counterpart(op: Op, free: list, cache: dict) -> Optional[Op]:
    """The first of ``free`` of ``op``'s kind (and size, for a write) naming the same file, else the first
    of that kind, else None (see :func:`label`)."""
    size = op.size if ELIDED in op.flags else len(op.data)
    same_kind = [k for k in free if k.kind == op.kind and (op.kind != "write" or k.size == size)]

    def real(path: Optional[str]) -> Optional[str]:
        return _nameless(_real(path, cache))
    named = real(op.path), real(op.dest)
    return next((k for k in same_kind if (real(k.path), real(k.dest)) == named), None) \
        or (same_kind[0] if same_kind else None)


def _take_labels(match: Op, op: Op) -> None:
    """Give the kernel's operation ``match`` the words of the recorded ``op`` (see :func:`label`)."""
    if op.api and _API.match(op.api) and not ("cut" in match.flags and not op.api.endswith(match.api)):
        match.api = op.api  # (a copy of unknown bytes keeps the kernel's name for it: splice is no os.sendfile)
    if UNSURE in match.flags:
        match.is_dir, match.flags = bool(op.is_dir), match.flags - {UNSURE}
    if op.kind == "open" and "existed" in op.flags:
        match.flags = match.flags | {"existed"}
        if "append" in match.flags and isinstance(op.size, int) and op.size > 0:
            match.size = op.size  # where its writes begin (see _python_words): only words
    if op.kind == "write" and match.offset < 0 and isinstance(op.offset, int) and op.offset >= 0:
        match.offset = op.offset  # only words: an appending handle's writes land at the end in the replay


# The Python function behind a system call where the worker has no word for it (it replaces no function
# to watch these: grader.grading.worker): fsync comes only from os.fsync; a write, or a resize, through a
# descriptor from os.open is os.write's, and one through a file from open() is the file object's.
_BY_OS_OPEN = {"write": "os.write", "pwrite64": "os.pwrite", "writev": "os.writev", "pwritev": "os.pwritev",
               "ftruncate": "os.ftruncate"}
_ALWAYS = {"fsync": "os.fsync", "fdatasync": "os.fdatasync", "truncate": "os.truncate", "sync": "os.sync",
           "syncfs": "os.syncfs"}


def _python_words(ops: list, opened_by: dict) -> None:
    """Name the kernel's operations as the learner's Python code made them (only words), from the words
    their opens were given."""
    for op in ops:
        if op.kind == "open" and op.handle is not None and op.api in ("open", "os.open"):
            opened_by[op.handle] = op.api
            if "append" in op.flags:  # where its writes land: at the end, which the open's word gave
                opened_by[("at", op.handle)] = op.size if "existed" in op.flags and "trunc" not in op.flags else 0
        elif op.kind == "write" and op.offset < 0 and ("at", op.handle) in opened_by:
            op.offset = opened_by[("at", op.handle)]
            opened_by[("at", op.handle)] += op.size
            if op.api in _BY_OS_OPEN and opened_by[op.handle] == "os.open":
                op.api = _BY_OS_OPEN[op.api]
        elif op.api in _ALWAYS:
            op.api = _ALWAYS[op.api]
        elif op.api in _BY_OS_OPEN and op.handle is not None and op.handle in opened_by:
            op.api = _BY_OS_OPEN[op.api] if opened_by[op.handle] == "os.open" else \
                "truncate" if op.api == "ftruncate" else op.api


def reconcile(recorded: list, kernel: list, roots: list) -> tuple[list, Optional[str]]:
    """One stretch of a run: the operations the crash states are built from (the kernel's, as the judge
    names them, labelled by the recorder's), and why the run cannot be graded, or None (see :func:`label`,
    :func:`translate`). :meth:`KernelTrace.settle` is the same, message by message."""
    ops, problem = translate(kernel, roots)
    forged, _ = label(recorded, [op for op in ops if claimable_by_recorder(op, roots)], roots)
    return ops, problem or forged


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
    """``3<path>`` (strace -y): the descriptor and the path it names (AT_FDCWD gives -100). A bare number is a
    descriptor strace could not name (a path longer than the kernel names whole): its path is ""."""
    arg = arg.strip()
    if "<" not in arg and _LEADING_INT.fullmatch(arg):
        return int(arg, 0), ""
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
