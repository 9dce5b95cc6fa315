"""Any program, run once under the kernel trace in a box, and its crash states checked in boxes too.

The parts behind ``crashcourse explore`` that touch processes and the disk:

* :func:`snapshot` reads the watched folder (every regular file's bytes, every subfolder);
* :class:`ProgramRun` copies it, runs the program once under ``strace -f`` in a bubblewrap box
  where the copy sits at the real folder's path (the real folder is never written), and keeps the
  trace in a file on disk;
* :func:`operations` streams that file into :class:`~grader.engine.ops.Op` objects with
  :class:`~grader.grading.kernel_trace.KernelTrace`'s reader (one line at a time: a trace of a
  million writes is never held whole), each with the process that made it and, under
  ``strace -k``, the first frame of its stack that belongs to the program rather than the C library;
* :func:`lay_out` writes one crash state into a fresh folder, refusing any name that could leave it;
* :func:`run_checker` runs the checker command on that folder, in a box, with a time limit.

The box here is not the grading box (:mod:`grader.grading.bubblewrap`), which admits only the kit
and Python: a program of any language needs its interpreter, its libraries and its own files, so
the whole machine is visible read-only, and the only writable places are the folder's copy and a
private temp folder (``TMPDIR``). No network, its own pid namespace, every capability dropped.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Iterator, Optional

from grader.engine.ops import Op
from grader.grading import kernel_trace, sandbox

OUTPUT_LIMIT = 16 * 1024
# With --stacks, a Python program (or a Python child) is started with this sitecustomize on its path.
# Before each call of a C function that can change a file (write, fsync, replace...), it writes the
# calling line of the program's own code (not the standard library's) with a write to descriptor -1:
# the kernel refuses it, strace records it in order with the program's real calls, and the reader
# below names that line for the calls that follow in the same process.
MARK = "crashcourse-frame:"
SITECUSTOMIZE = f"""
import os as _os, sys as _sys, sysconfig as _sysconfig, threading as _threading
_NAMES = frozenset({{"write", "writelines", "flush", "fsync", "fdatasync", "close", "open", "replace", "rename",
                    "remove", "unlink", "mkdir", "rmdir", "truncate", "ftruncate", "link", "sync", "sendfile"}})
_STD = tuple({{p for p in (_sysconfig.get_paths().get("stdlib"), _sysconfig.get_paths().get("platstdlib")) if p}})


def _crashcourse_profile(frame, event, arg):
    if event == "c_call" and getattr(arg, "__name__", "") in _NAMES:
        f = frame
        while f is not None and (f.f_code.co_filename.startswith(_STD) or f.f_code.co_filename.startswith("<")):
            f = f.f_back
        f = f or frame
        try:
            _os.write(-1, ("{MARK}%s:%d in %s" % (f.f_code.co_filename, f.f_lineno, f.f_code.co_name)).encode())
        except OSError:
            pass


_sys.setprofile(_crashcourse_profile)
_threading.setprofile(_crashcourse_profile)
# A sitecustomize of the program's own, further along the path, still runs.
import importlib.machinery as _machinery, importlib.util as _util
_here = _os.path.dirname(_os.path.abspath(__file__))
_spec = _machinery.PathFinder.find_spec("sitecustomize", [p for p in _sys.path if _os.path.abspath(p or ".") != _here])
if _spec is not None and _spec.loader is not None:
    _mod = _util.module_from_spec(_spec)
    _spec.loader.exec_module(_mod)
"""
_UNSEEN = {
    "mmap": "the program mapped {name} into memory for writing (mmap, MAP_SHARED): what it stored there "
            "changes the file with no system call, so no crash state shows it",
    "symlink": "the program made a symbolic link, {name}: crash states do not rebuild links",
    "proc": "the program named a file through a link in /proc that the trace cannot follow (into another "
            "process, or to a descriptor it never saw opened): what it did there is in no crash state",
    "append_off": "the program turned O_APPEND off on {name}: its writes then land at a position the trace does "
                  "not follow, so crash states may put them in the wrong place",
    "io_uring": "the program tried io_uring, which was refused (its writes would be invisible to the trace)",
    "cut": "the program wrote {name} with {api}, whose bytes the trace does not carry (copied inside the "
           "kernel, or longer than strace keeps): crash states hold zeros there, so judge {name} with care",
}
_NAME = re.compile(r"^\d+ +(?:<\.\.\. (\w+) resumed>|(\w+)\()")
_MARK_LINE = re.compile(r'^(\d+) +write\(-1, "' + re.escape(MARK) + r'((?:[^"\\]|\\.)*)"')
_FRAME = re.compile(r"^ > (\S+?)\(([^)]*)\) \[(0x[0-9a-f]+)\]")
# Frames of the C library and the loader say nothing about the program's own code.
_RUNTIME = re.compile(r"/(?:libc|ld-linux|libpthread|libstdc\+\+|libuv)[.-]")


def box_problem() -> Optional[str]:
    """None when a bubblewrap box starts here; otherwise why not, in words (checked once)."""
    if "box" not in _CHECKED:
        if shutil.which("bwrap") is None:
            _CHECKED["box"] = ("bubblewrap (the `bwrap` command) is not installed (Debian or Ubuntu: "
                               "`apt-get install bubblewrap`); use --no-box to run without one")
        else:
            with tempfile.TemporaryDirectory(prefix="crashcourse-explore-probe-") as root:
                try:
                    proc = subprocess.run(box_command(["true"], binds=[(root, root)], cwd=root),
                                          capture_output=True, text=True, timeout=60)
                    _CHECKED["box"] = None if proc.returncode == 0 else \
                        f"bubblewrap could not make a box here ({proc.stderr.strip()[:200]}); use --no-box"
                except (OSError, subprocess.SubprocessError) as exc:
                    _CHECKED["box"] = f"bubblewrap could not start here ({exc}); use --no-box"
    return _CHECKED["box"]


_CHECKED: dict = {}


def box_command(argv: list, *, binds: list, cwd: str) -> list:
    """``argv`` in a box: the machine read-only, writable only at each ``(source, path)`` of ``binds``."""
    cmd = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--new-session", "--unshare-pid",
           "--unshare-net", "--unshare-ipc", "--unshare-uts"]
    if os.geteuid() != 0:
        cmd += ["--unshare-user"]
    cmd += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
    for source, path in binds:
        cmd += ["--bind", source, path]
    if os.geteuid() == 0:
        cmd += ["--cap-drop", "ALL"]
    return cmd + ["--chdir", cwd, "--"] + list(argv)


def _preexec(mount: Optional[tuple] = None) -> None:
    """In the child before it runs: no core files; ``mount``: ``(copy, folder)`` bound in a namespace of its own."""
    import resource
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if mount is not None:
        c = sandbox.libc()
        if c.unshare(sandbox.CLONE_NEWNS) != 0 or \
                c.mount(None, b"/", None, sandbox.MS_REC | sandbox.MS_PRIVATE, None) != 0 or \
                c.mount(os.fsencode(mount[0]), os.fsencode(mount[1]), None, sandbox.MS_BIND, None) != 0:
            os._exit(126)  # never run the program on the real folder


# -- the folder ----------------------------------------------------------------------------------

@dataclass
class Snapshot:
    files: dict            # absolute path -> bytes
    dirs: list             # absolute paths of subfolders
    skipped: list          # relative names that are neither files nor folders (links, sockets)


def snapshot(folder: str) -> Snapshot:
    """Every regular file and subfolder under ``folder`` (links are not followed, only listed as skipped)."""
    files, dirs, skipped = {}, [], []
    for root, subdirs, names in os.walk(folder, followlinks=False):
        for d in list(subdirs):
            full = os.path.join(root, d)
            if os.path.islink(full):
                skipped.append(os.path.relpath(full, folder))
                subdirs.remove(d)
            else:
                dirs.append(full)
        for n in names:
            full = os.path.join(root, n)
            if os.path.islink(full) or not os.path.isfile(full):
                skipped.append(os.path.relpath(full, folder))
                continue
            with open(full, "rb") as f:
                files[full] = f.read()
    return Snapshot(files, dirs, skipped)


# -- running the program once ------------------------------------------------------------------

@dataclass
class ProgramRun:
    """One run of ``argv`` with ``watch`` (absolute, real path) privately copied, under strace."""

    watch: str
    argv: list
    cwd: str
    box: bool = True
    stacks: bool = False
    timeout: float = 600.0
    scratch: str = ""
    folder: str = ""         # where the program sees the folder (the real path in a box)
    trace_path: str = ""
    returncode: Optional[int] = None
    output: bytes = b""
    seconds: float = 0.0
    timed_out: bool = False
    initial: Optional[Snapshot] = None
    notes: list = field(default_factory=list)

    def run(self) -> None:
        self.scratch = tempfile.mkdtemp(prefix="crashcourse-explore-")
        copy = os.path.join(self.scratch, "folder")
        shutil.copytree(self.watch, copy, symlinks=True)
        tmp = os.path.join(self.scratch, "tmp")
        os.mkdir(tmp)
        argv, cwd = list(self.argv), self.cwd
        if self.box:
            self.folder = self.watch
            binds = [(copy, self.watch), (tmp, tmp)]
            argv = [a.replace("{dir}", self.watch) for a in argv]
        elif os.geteuid() == 0:
            # No box, but root may still give the program a mount namespace with the copy over the folder.
            self.folder = self.watch
            argv = [a.replace("{dir}", self.watch) for a in argv]
            self.notes.append("no box: the program ran with the copy mounted over the folder (a mount namespace "
                              "of its own), and could write anywhere else you can")
        else:
            # No mount namespace: the program is pointed at the copy, wherever it named the folder.
            self.folder = copy
            argv = [_moved(a.replace("{dir}", copy), self.watch, copy) for a in argv]
            cwd = _moved(cwd, self.watch, copy)
            self.notes.append(f"no box: the program ran on a copy at {copy} (its arguments and working folder "
                              "naming the watched folder were pointed there; use {dir} inside a longer "
                              "argument), and could write anywhere you can")
        self.initial = snapshot(copy)
        if self.folder != copy:  # the snapshot names files where the program sees them
            self.initial = Snapshot({self.watch + k[len(copy):]: v for k, v in self.initial.files.items()},
                                    [self.watch + d[len(copy):] for d in self.initial.dirs], self.initial.skipped)
        self.trace_path = os.path.join(self.scratch, "trace")
        strace = kernel_trace.strace_args() + ["-o", self.trace_path]
        if self.stacks:
            strace.insert(1, "-k")
        command = strace + ["--"] + (box_command(argv, binds=binds, cwd=cwd) if self.box else argv)
        env = dict(os.environ, TMPDIR=tmp)
        if self.stacks:
            hook = os.path.join(self.scratch, "python-frames")
            os.mkdir(hook)
            with open(os.path.join(hook, "sitecustomize.py"), "w") as f:
                f.write(SITECUSTOMIZE)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (hook, os.environ.get("PYTHONPATH")) if p)
        out_path = os.path.join(self.scratch, "output")
        start = time.monotonic()
        with open(out_path, "wb") as out:
            mount = (copy, self.watch) if not self.box and self.folder == self.watch else None
            proc = subprocess.Popen(command, cwd=cwd if not self.box else "/", stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                    preexec_fn=_preexec if mount is None else lambda: _preexec(mount))
            try:
                self.returncode = proc.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                self.timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                self.returncode = proc.wait()
        self.seconds = time.monotonic() - start
        with open(out_path, "rb") as f:
            self.output = f.read(OUTPUT_LIMIT)

    def cleanup(self) -> None:
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)


def _moved(arg: str, old: str, new: str) -> str:
    if arg == old or arg.startswith(old + os.sep):
        return new + arg[len(old):]
    if os.path.isabs(arg):
        return arg
    full = os.path.abspath(arg)
    return new + full[len(old):] if full == old or full.startswith(old + os.sep) else arg


# -- reading the trace -------------------------------------------------------------------------------

class TracedOp(Op):
    """An operation read from a program's trace, with the working folder it was made from (``cwd``):
    a program that names its files relative to it (git, ``rm``) is aimed at by that name."""

    __slots__ = ("cwd",)

    @classmethod
    def of(cls, op: Op, cwd: str) -> "TracedOp":
        out = cls.__new__(cls)
        for name in Op.__slots__:
            setattr(out, name, getattr(op, name))
        out.cwd = cwd
        return out


def operations(trace_path: str, cwd: str, folder: str, unseen: Optional[list] = None) -> Iterator[TracedOp]:
    """The trace's file-system operations on ``folder`` (and every ``sync``), in order, one at a time.

    Each carries ``note`` = the process id, ``index`` = how many calls of its name (``api``) on its
    path that process had made, this one included (what ``strace -P PATH -e inject=NAME:when=N``
    counts, so a real kill can be aimed at it), ``cwd`` = the folder it was made from, and
    ``payload`` = the program's own line (Python) or the first frame of its stack outside the C
    library (``strace -k``), or None.

    What the trace cannot follow (a shared writable ``mmap`` of a file in the folder, a symbolic
    link made there, ``io_uring``) is not an operation: each is added to ``unseen`` in words.
    """
    reading = _TraceReading(cwd, folder, unseen)
    with open(trace_path, "rb") as f:
        for raw in f:
            line = raw.rstrip(b"\n").decode("latin-1")
            if reading.annotation(line):
                continue
            yield from reading.take()  # the calls before this line: no more frames can come for them
            reading.call(line)
    yield from reading.take()


class _TraceReading:
    """A program's trace read line by line (see :func:`operations`): the kernel trace's reader makes the
    operations, and this keeps the folder's, numbered per process, call and path, with their lines."""

    def __init__(self, cwd: str, folder: str, unseen: Optional[list]):
        # The kernel trace's reader, without its memfd: lines are fed to it one at a time from the file.
        self.reader = kernel_trace.KernelTrace(tempfile.gettempdir())
        self.reader.close()
        self.reader.cwd = os.path.realpath(cwd)
        self.folder, self.prefix, self.unseen = folder, folder + os.sep, unseen
        self.last: Optional[Op] = None  # the latest operation kept: a stack frame after it is its own
        self.pending: list = []
        self.counts: dict = {}  # (pid, call name, path) -> calls so far
        self.python_line: dict = {}  # pid -> the program's Python line that made its latest call (see SITECUSTOMIZE)

    def annotation(self, line: str) -> bool:
        """Read a line that is not a call (the program's Python line, a frame of a call's stack)."""
        if MARK in line:
            m = _MARK_LINE.match(line)
            if m:
                self.python_line[m.group(1)] = os.fsdecode(codecs.escape_decode(m.group(2).encode("latin-1"))[0])
                return True
        if not line.startswith(" > "):
            return False
        if self.last is not None and self.last.payload is None:
            m = _FRAME.match(line)
            if m and not _RUNTIME.search(m.group(1)):
                # A stripped binary names no function: its address in the file is all there is.
                self.last.payload = f"{m.group(2) or m.group(3)} in {os.path.basename(m.group(1))}"
        return True

    def take(self) -> list:
        taken, self.pending = self.pending, []
        return taken

    def call(self, line: str) -> None:
        """Read one call's line: count it for each file it names, and keep the operations it made."""
        reader = self.reader
        before = len(reader.ops)
        pid = line.split(" ", 1)[0]
        call = _NAME.match(line)
        if call and not line.endswith(" <unfinished ...>"):
            name = call.group(1) or call.group(2)
            for path in _paths(line, reader.cwd, name not in _DATA_CALLS):
                self.counts[(pid, name, path)] = self.counts.get((pid, name, path), 0) + 1
        reader._line(line)  # noqa: SLF001 - the kernel trace's own reader, fed line by line
        if reader.tampered:
            raise ValueError(f"the trace could not be read: {reader.tampered}")
        new = [op for _, op in reader.ops[before:]]
        del reader.ops[:]
        for op in (TracedOp.of(op, reader.cwd) for op in new):
            if op.kind in kernel_trace.MARKERS:
                self._unseen_marker(op)
                continue
            if op.kind == "write" and "cut" in op.flags and (op.path or "").startswith(self.prefix):
                self._zeros_for_uncarried(op)
            if op.kind == "sync" or (op.path or "").startswith(self.prefix) \
                    or (op.dest or "").startswith(self.prefix) or op.path == self.folder:
                self._keep(op, pid)

    def _unseen_marker(self, op: Op) -> None:
        if self.unseen is not None and (op.kind in kernel_trace.REFUSED_ANYWHERE or (op.path or "").startswith(self.prefix)):
            self.unseen.append(_UNSEEN[op.kind].format(name=os.path.relpath(op.path or self.folder, self.folder)))

    def _zeros_for_uncarried(self, op: Op) -> None:
        """Bytes copied inside the kernel (copy_file_range, sendfile) or past strace's limit: the sizes
        are right, the bytes the trace did not carry are zeros."""
        if self.unseen is not None:
            self.unseen.append(_UNSEEN["cut"].format(name=os.path.relpath(op.path, self.folder), api=op.api))
        op.data = op.data + b"\0" * max(0, op.size - len(op.data))

    def _keep(self, op: Op, pid: str) -> None:
        op.note = f"pid {pid}"
        op.index = self.counts.get((pid, op.api, op.path), 0)
        op.payload = self.python_line.get(pid)
        self.pending.append(op)
        self.last = op


_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
_ANNOTATED = re.compile(r"<(/[^>]*)>")


_DATA_CALLS = frozenset({"write", "pwrite64", "writev", "pwritev", "pwritev2", "read", "pread64"})


def _paths(line: str, cwd: str, strings: bool = True) -> set:
    """Every file a trace line names (its descriptors' paths and, with ``strings``, its path arguments),
    as strace's -P sees them. A write's data is never taken for a path (nor kept: a million writes of
    distinct records would each add a name)."""
    out = set()
    head = line.split(") = ", 1)
    for m in _ANNOTATED.finditer(head[0] if not strings else line):
        out.add(m.group(1))
    if strings and len(head) == 2 and len(head[0]) < 8192:
        for m in _QUOTED.finditer(head[0]):
            text = m.group(1)
            if "\\" not in text and len(text) < 4096:
                out.add(os.path.normpath(os.path.join(cwd, text)))
    return out


# -- one crash state on disk, and its check ---------------------------------------------------------

def lay_out(files: dict, dirs: tuple, folder: str) -> list:
    """Write ``files`` (relative name -> bytes) and ``dirs`` under the new, empty ``folder``.

    Every name comes from a trace, so none is trusted: an absolute name, an empty, ``.`` or ``..``
    part, or a part that is already a file, is refused (and returned, with why); each folder is
    opened without following links and each file is created fresh in it.
    """
    refused = []
    root = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        def parent_fd(parts: list) -> int:
            fd = os.dup(root)
            for part in parts:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
                try:
                    nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                finally:
                    os.close(fd)
                fd = nxt
            return fd

        for name in sorted(dirs, key=lambda d: d.count(os.sep)):
            parts = name.split(os.sep)
            if not _safe(parts):
                refused.append((name, "not a plain name inside the folder"))
                continue
            try:
                os.close(parent_fd(parts))
            except OSError as exc:
                refused.append((name, exc.strerror or str(exc)))
        for name, data in files.items():
            parts = name.split(os.sep)
            if not _safe(parts):
                refused.append((name, "not a plain name inside the folder"))
                continue
            try:
                fd = parent_fd(parts[:-1])
            except OSError as exc:
                refused.append((name, exc.strerror or str(exc)))
                continue
            try:
                out = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=fd)
                with os.fdopen(out, "wb") as f:
                    f.write(data)
            except OSError as exc:
                refused.append((name, exc.strerror or str(exc)))
            finally:
                os.close(fd)
    finally:
        os.close(root)
    return refused


def _safe(parts: list) -> bool:
    return bool(parts) and all(p not in ("", ".", "..") and "\0" not in p for p in parts)


@dataclass
class Verdict:
    broken: bool
    returncode: Optional[int]
    output: str
    seconds: float
    timed_out: bool = False


def run_checker(command: str, folder: str, *, box: bool, timeout: float, tmp: str, cwd: str) -> Verdict:
    """``command`` (``{dir}`` replaced by ``folder``) run by ``sh -c`` in ``cwd``; a non-zero exit means broken."""
    text = command.replace("{dir}", shlex.quote(folder)) if "{dir}" in command else f"{command} {shlex.quote(folder)}"
    argv = ["sh", "-c", text]
    if box:
        argv = box_command(argv, binds=[(folder, folder), (tmp, tmp)], cwd=cwd)
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd if not box else "/", stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=dict(os.environ, TMPDIR=tmp), start_new_session=True,
                            preexec_fn=_preexec)
    try:
        out, _ = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        timed_out = True
    said = out[:OUTPUT_LIMIT].decode("utf-8", "replace")
    return Verdict(timed_out or proc.returncode != 0, proc.returncode, said, time.monotonic() - start, timed_out)
