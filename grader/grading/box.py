"""One submission's box as the judge sees it: its folder, its time budget, and the worker process.

:class:`Box` holds what the judge knows about one submission (its folder, the time its code has
used, what went wrong and in which test, what it printed); :class:`Worker` is the sandboxed
process (:mod:`grader.grading.worker`) and the pipes to it, speaking :mod:`grader.grading.wire`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator, Optional

from grader.engine import hangs
from grader.engine.recorder import real_os
from grader.grading import bubblewrap
from grader.grading import kernel_trace
from grader.grading import sandbox
from grader.grading.wire import FORK_SERVER_KILLED, HEADER, MAX_MESSAGE, reply_size, request_frame, unframe

KIT_PARENT = str(Path(__file__).resolve().parents[2])


class SandboxProblem(Exception):
    """The submission's process hung, died, or used up its time: the reason a test could not run."""


class Incident(SandboxProblem):
    pass


class Box:
    """One submission's sandbox as the judge sees it: the folder, the deadline, the worker."""

    def __init__(self, folder: str, root: str, token: str, timeout: float, limits: Optional[sandbox.Limits] = None,
                 read_only: Optional[bool] = None, hide: tuple = (), boxed: bool = False):
        self.hide = tuple(hide)
        self.boxed = boxed  # a bubblewrap box (grader.grading.bubblewrap); otherwise the bare sandbox
        self.folder = os.path.realpath(folder)
        self.root = os.path.realpath(root)
        self.token = token
        self.timeout = timeout
        self.spent = 0.0  # seconds spent waiting on the submission's code (the judge's own work is free)
        self.limits = limits or (bubblewrap.Limits if boxed else sandbox.Limits)(cpu_seconds=int(timeout) + 10)
        self.read_only = read_only
        self.worker: Optional[Worker] = None
        self.generation = 0
        self.expired: Optional[str] = None
        self.incidents: dict[str, str] = {}
        self.stuck: dict = {}  # the learner's function names on a stack that got stuck in the worker -> its Hang
        self.current = ""
        self.output = bytearray()
        self.output_dropped = 0
        self.load_failures: dict[str, str] = {}
        self.calls = 0
        # The folder as handed in, taken before any of its code runs: every worker starts from it.
        self.pristine = Pristine(self.folder)
        # Whether each worker runs under strace (grader.grading.kernel_trace), and if not, why not.
        self.kernel_problem = kernel_trace.problem()

    def incident(self, reason: str) -> str:
        self.incidents.setdefault(self.current or "(outside any test)", reason)
        return reason

    def ensure_worker(self) -> "Worker":
        if self.expired:
            raise Incident(self.expired)
        if self.worker is None or not self.worker.alive:
            if self.worker is not None:
                self.worker.stop()
            self.generation += 1
            # A box's start (bubblewrap, the tracer, the worker's interpreter) is the grader's time, not the
            # code's: on a busy machine it can take seconds, and it must not use up a function's limit.
            with hangs.paused():
                self.worker = Worker(self)
        return self.worker

    def time_left(self) -> float:
        return self.timeout - self.spent

    def wait(self, rlist: list, wlist: list) -> tuple:
        """select() on the worker's pipes, charging the time to the submission's budget."""
        started = time.monotonic()
        try:
            readable, writable, _ = select.select(rlist, wlist, [], max(self.time_left(), 0))
        finally:
            self.spent += time.monotonic() - started
        return readable, writable

    def take_output(self, data: bytes) -> None:
        room = self.limits.output - len(self.output)
        if room > 0:
            self.output += data[:room]
        self.output_dropped += max(0, len(data) - max(room, 0))

    def shutdown(self) -> int:
        killed = 0
        if self.worker is not None:
            killed = self.worker.stop()
            self.worker = None
        killed += sandbox.kill_tree(self.token, root_pid=os.getpid())
        return killed


def fresh_folder(path: str) -> None:
    """An empty folder at ``path``, whatever a worker left there (never following a link)."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISDIR(os.lstat(path).st_mode):
            _remove_tree(path)
        else:
            os.unlink(path)
    os.makedirs(path, exist_ok=True)


def _remove_tree(path: str) -> None:
    """``shutil.rmtree``, also where the code took its own write permission away from a folder in it."""
    def retry(func, name, _exc) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(name), 0o700)
        with contextlib.suppress(OSError):
            if stat.S_ISDIR(os.lstat(name).st_mode):
                os.chmod(name, 0o700)
        if func is os.rmdir and stat.S_ISDIR(os.lstat(name).st_mode):
            shutil.rmtree(name, onerror=retry)  # emptied only now that it can be read
        else:
            func(name)
    shutil.rmtree(path, onerror=retry)


KEEP = ("keep",)  # Pristine: an entry the judge could not read, so it leaves it as it finds it


class Pristine:
    """The submission's folder as handed in, kept by the judge: :meth:`restore` puts it back.

    Under the learner's own pytest the code's folder is writable and outlives a test, but under
    ``grade`` a worker is one of several (the plain runs, and for a fault check its run without the
    fault, then with it): a file left beside the code would let it count them, and tell a run with
    a fault from the same steps run without one. So every worker sees the folder as handed in. Only
    what changed is put back, so an untouched file keeps its inode and times.
    """

    def __init__(self, folder: str):
        self.folder = folder
        self.mode = stat.S_IMODE(os.lstat(folder).st_mode)
        self.entries: dict = {}  # relative name -> (mode, None) for a folder, (mode, bytes, times, signature) for a file
        for parent, dirs, files in os.walk(folder):
            for name in dirs + files:
                path = os.path.join(parent, name)
                st = os.lstat(path)
                rel = os.path.relpath(path, folder)
                if stat.S_ISDIR(st.st_mode):
                    self.entries[rel] = (stat.S_IMODE(st.st_mode), None, None, None)
                elif stat.S_ISREG(st.st_mode):
                    try:
                        with open(path, "rb") as f:
                            data = f.read()
                    except OSError:  # a file the judge may not read (handed in with no permissions): left as is
                        self.entries[rel] = KEEP
                        continue
                    self.entries[rel] = (stat.S_IMODE(st.st_mode), data, (st.st_atime_ns, st.st_mtime_ns),
                                         _signature(st))

    def restore(self) -> None:
        folder = self.folder
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                os.unlink(folder)
        os.makedirs(folder, exist_ok=True)
        if stat.S_IMODE(os.lstat(folder).st_mode) != self.mode:
            os.chmod(folder, self.mode)
        for dirs, name, path in _outside(folder, ()):
            st = os.lstat(path)
            want = self.entries.get(os.path.relpath(path, folder))
            if want is KEEP:
                continue
            kept = want is not None and (stat.S_ISDIR(st.st_mode) if want[1] is None else
                                         stat.S_ISREG(st.st_mode) and _signature(st) == want[3])
            if kept and want[1] is None and stat.S_IMODE(st.st_mode) != want[0]:
                os.chmod(path, want[0])
            if kept:
                continue
            if name in dirs:
                dirs.remove(name)  # not walked into: it goes, or is replaced, whole
            if stat.S_ISDIR(st.st_mode):
                _remove_tree(path)
            else:
                os.unlink(path)
        for rel, entry in sorted(self.entries.items()):
            path = os.path.join(folder, rel)
            if entry is KEEP or os.path.lexists(path):
                continue
            mode, data, times, _ = entry
            if not os.path.isdir(os.path.dirname(path)):
                continue
            if data is None:
                os.mkdir(path, mode)
                os.chmod(path, mode)
                continue
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
            os.utime(path, ns=times, follow_symlinks=False)
            self.entries[rel] = (mode, data, times, _signature(os.lstat(path)))


def listing(root: str, skip: tuple) -> dict:
    """Every entry under ``root`` (relative name -> its kind, and a file's signature), not looking into ``skip``."""
    seen: dict = {}
    for _dirs, _name, path in _outside(root, skip):
        with contextlib.suppress(FileNotFoundError):
            seen[os.path.relpath(path, root)] = _kind(os.lstat(path))
    return seen


def sweep(root: str, before: dict, skip: tuple) -> list:
    """Remove what was made under ``root`` since ``before`` (:func:`listing`), outside ``skip``.

    Returns the files of ``before`` that have changed since, which cannot be put back."""
    changed = []
    for dirs, name, path in _outside(root, skip):
        st = os.lstat(path)
        now, was = _kind(st), before.get(os.path.relpath(path, root))
        if was is None or type(was) is not type(now) or (not isinstance(now, tuple) and was != now):
            if name in dirs:
                dirs.remove(name)
            if stat.S_ISDIR(st.st_mode):
                _remove_tree(path)
            else:
                os.unlink(path)
        elif was != now:
            changed.append(os.path.relpath(path, root))
    return changed


def _outside(root: str, skip: tuple) -> Iterator[tuple[list, str, str]]:
    """``(dirs, name, path)`` for every entry under ``root``, not looking into ``skip``; a caller that
    removes a folder takes its name out of ``dirs``, so it is not walked into."""
    skip = tuple(os.path.realpath(p) for p in skip)
    for parent, dirs, files in os.walk(root):
        for name in list(dirs) + files:
            path = os.path.join(parent, name)
            if path in skip:
                if name in dirs:
                    dirs.remove(name)
                continue
            yield dirs, name, path


def _kind(st: os.stat_result) -> Any:
    """What :func:`listing` keeps of an entry: a file's signature, or the kind of anything else."""
    return _signature(st) if stat.S_ISREG(st.st_mode) else stat.S_IFMT(st.st_mode)


def _signature(st: os.stat_result) -> tuple:
    """What changes when a file is written, replaced or has its mode changed (ctime moves with any of them)."""
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode


class Worker:
    """The sandboxed process, and the two pipes to it (plus one for whatever it prints)."""

    def __init__(self, box: Box, inject: Optional[tuple] = None):
        """``inject``: for a check's fault, the faults the tracer makes the kernel report (strace
        ``inject=`` expressions, none for the run that finds them; see :mod:`grader.grading.faults`).
        Such a worker's trace keeps every traced call, failed ones too."""
        self.box = box
        to_worker_r, self.to_worker = os.pipe()
        self.from_worker, from_worker_w = os.pipe()
        self.out_r, out_w = os.pipe()
        traced = box.kernel_problem is None
        # The judge takes written bytes from the kernel trace.
        extra = ", '--bytes', 'kernel'" if traced else ""
        # pytest's version, which a learner's own pytest puts in the environment before anything of theirs runs.
        version = os.environ.get("PYTEST_VERSION", "")
        if version.replace(".", "").isalnum():
            extra += f", '--pytest', {version!r}"
        # Neither -S nor -I: their flags (sys.flags.no_site, isolated, safe_path) would tell the code
        # it is graded, and -S would leave out what site gives any run (exit(), help(), the
        # site-packages .pth files). Site's start costs about 6 ms more per worker
        # (benchmarks/worker_start.py). What -I guards against is not there: no PYTHON* variable in the
        # box's environment, a fresh empty HOME (no user site). The working folder -c puts first on
        # the path is taken off.
        code = (f"import sys, site; sys.path[:] = [{KIT_PARENT!r}] + [p for p in sys.path if p] "
                f"+ [p for p in site.getsitepackages() if p not in sys.path]; "
                f"from grader.grading.worker import main; "
                f"main(['--read', '{to_worker_r}', '--write', '{from_worker_w}', '--folder', {box.folder!r}{extra}])")
        env = sandbox.scrubbed_env(box.root, box.token)
        # Every worker starts as a learner's first run does on a fresh machine: an empty HOME (also
        # the working folder) and the submission's folder as handed in. Nothing one worker leaves
        # there reaches the next, so no count of runs kept there says which run has a fault.
        try:
            fresh_folder(env["HOME"])
            box.pristine.restore()
        except OSError as exc:
            raise Incident(box.incident(f"the grader could not give your code a fresh start ({exc}): what an "
                                        "earlier run of it left could not be cleared")) from exc
        os.makedirs(env["TMPDIR"], exist_ok=True)
        if box.boxed:
            # The box's own /tmp (bubblewrap.command: a small tmpfs) is the system temp folder, a file
            # system apart from the submission's folder as on a usual machine: a temp file made there
            # cannot be renamed into the checkpoint folder (EXDEV), and shutil.move copies it instead.
            env["TMPDIR"] = "/tmp"
        argv = [sys.executable, "-c", code]
        pass_fds = (to_worker_r, from_worker_w)
        self.cgroup = None
        self.consumed = 0  # bytes of whole messages read from the worker (where the kernel trace must reach)
        self.dropped_output = 0  # bytes of output the worker counted but did not write (worker._Capped)
        self.kernel: Optional[kernel_trace.KernelTrace] = None
        if traced:
            self.kernel = kernel_trace.KernelTrace(box.root, keep_calls=inject is not None, cap=box.limits.file_size)
            pass_fds += self.kernel.pass_fds
        wrap = (lambda command, cwd: self.kernel.wrap(command, cwd, inject=inject or (),
                                                      file_size=box.limits.file_size)) \
            if self.kernel is not None else None
        if box.boxed:
            # strace wraps bwrap: the tracer stays outside the box's pid namespace, out of its reach,
            # and stays root while a box graded by root drops to a uid of its own (bubblewrap._launch).
            self.cgroup, self.proc = bubblewrap.start(box, argv, pass_fds, out_w, env, env["HOME"], wrap=wrap)
        else:
            command = wrap(argv, env["HOME"]) if wrap is not None else argv
            self.proc = subprocess.Popen(command, pass_fds=pass_fds,
                                         stdin=subprocess.DEVNULL, stdout=out_w, stderr=out_w, env=env,
                                         cwd=env["HOME"], start_new_session=True,
                                         preexec_fn=sandbox.preexec_for(box.limits, box.root, box.read_only,
                                                                        box.hide, traced=wrap is not None))
        for fd in (to_worker_r, from_worker_w, out_w):
            os.close(fd)
        if self.kernel is not None:
            self.kernel.started(self.from_worker, self.proc)
        os.set_blocking(self.to_worker, False)
        for fd in (self.from_worker, self.out_r):
            with contextlib.suppress(OSError, AttributeError):
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)  # fewer wake-ups for a chatty worker
        self.sent_messages: dict = {}  # callback -> the messages its last call carried (see stand_in.with_kept_messages)
        self.buffer = bytearray(1 << 20)
        self.view = memoryview(self.buffer)
        self.inbox = bytearray()
        self.alive = True
        self.read_message("starting", startup=True)

    # pipes
    def send(self, message: dict, what: str) -> None:
        view = memoryview(request_frame(message))
        write = real_os("write")  # the judge's own pipe is not the submission's file
        while view:
            left = self.box.time_left()
            if left <= 0:
                self.expire(what)
            _, ready = self.box.wait([], [self.to_worker])
            if ready:
                try:
                    n = write(self.to_worker, view)
                except BlockingIOError:
                    continue
                except BrokenPipeError:
                    self.died(what)
                view = view[n:]

    def read_message(self, what: str, startup: bool = False, objects: Optional[dict] = None) -> dict:
        """The worker's next message, decoded (``objects``: the judge's own objects handed to this call)."""
        while True:
            if len(self.inbox) >= HEADER:
                size = reply_size(bytes(self.inbox[:HEADER]))
                if size > MAX_MESSAGE:
                    self.stop()
                    raise Incident(self.box.incident(f"the process running your code sent the grader "
                                                     f"{size} bytes at once while {what}; it was stopped"))
                if len(self.inbox) >= HEADER + size:
                    data = bytes(self.inbox[:HEADER + size])
                    del self.inbox[:HEADER + size]
                    self.consumed += HEADER + size
                    message = unframe(data, objects)
                    if not isinstance(message, dict):
                        self.stop()
                        raise Incident(self.box.incident(
                            f"the process running your code sent the grader something it could not read while {what}: "
                            "a broken run (a message not in the grader's format, or one naming sizes, offsets or bytes "
                            "past what the box allows, or costing far more to read than its size), so nothing is scored"))
                    return message
            left = self.box.time_left()
            if left <= 0:
                self.expire(what)
            fds = [self.from_worker] + ([self.out_r] if self.out_r is not None else [])
            ready, _ = self.box.wait(fds, [])
            for fd in ready:
                # Into one buffer kept for the worker's life: a fresh megabyte per read cost page
                # faults for every read of a submission that prints without end.
                n = os.readv(fd, [self.buffer])
                if fd == self.out_r:
                    if n:
                        self.box.take_output(self.view[:n])
                    else:
                        os.close(self.out_r)
                        self.out_r = None
                elif not n:
                    self.died(what)
                else:
                    self.inbox += self.view[:n]

    def expire(self, what: str) -> None:
        self.stop()
        reason = (f"your code had run for {self.box.timeout:g} s in all, the time one submission gets "
                  f"(it was {what}). Is something waiting forever, or looping without end?")
        self.box.expired = reason
        raise Incident(self.box.incident(reason))

    def died(self, what: str) -> None:
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        tracer = self.kernel is not None and code is not None and code < 0 and self.kernel.tracer_killed()
        self.stop()
        if tracer and code == -signal.SIGXFSZ:
            # Everything the code writes is printed in the trace (to a file, a pipe, /dev/null, the
            # screen), and strace's own cap on it (Limits.trace) bounds what a box can make the judge
            # read; the judge stops a run sooner, at the box's cap, the worker's messages to it aside
            # (kernel_trace.FLOOD), when it reads the trace in time.
            raise Incident(self.box.incident(
                f"your code wrote more than {self.box.limits.file_size // 2**20} MiB in all while {what} (to "
                "files, /dev/null, pipes or the screen: the grader's trace of it holds every byte, and is capped "
                "like any file of the box), so the run was stopped and nothing is scored. A checkpointing loop "
                "writes far less: look for a write or a print in a loop"))
        if tracer:
            raise Incident(self.box.incident(
                f"the tracer that watches your code's file operations was killed while {what} (code in this "
                "submission can do that, for instance with os.kill(os.getppid(), ...)). Without it nothing your "
                "code does to files can be checked, so nothing is scored"))
        if code is not None and code < 0:
            sig = -code
            why = {signal.SIGXCPU: "it used more CPU time than a submission may",
                   signal.SIGXFSZ: f"it wrote a file larger than {self.box.limits.file_size // 2**20} MiB",
                   signal.SIGKILL: "it was killed (out of memory?)"}.get(sig, f"signal {sig}")
            status = f"ended by {signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else sig}: {why}"
        elif code == FORK_SERVER_KILLED:
            raise Incident(self.box.incident(
                f"your code killed the process that started it while {what}: each resume, load or second run "
                "after a crash starts your file afresh in a child of a process the grader keeps for that, and "
                "your file kills its parent when it is imported (os.kill(os.getppid(), ...)). Nothing that "
                "process would have run can be checked"))
        else:
            status = f"exit status {code}"
        raise Incident(self.box.incident(
            f"the process running your code ended while {what} ({status}). A function that calls sys.exit, "
            "os._exit or kills its own process never returns to the grader, so nothing it did can be checked."))

    def stop(self) -> int:
        if not self.alive:
            return 0
        self.alive = False
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=5)
        # Anything still alive now was started by the submission and outlived it: a stray.
        killed = sandbox.kill_tree(self.box.token, root_pid=self.proc.pid, session=self.proc.pid)
        if self.cgroup is not None:
            self.cgroup.remove()
        # Whatever it printed before it stopped is part of its output.
        if self.out_r is not None:
            with contextlib.suppress(OSError):
                os.set_blocking(self.out_r, False)
                while True:
                    data = os.read(self.out_r, 1 << 20)
                    if not data:
                        break
                    self.box.take_output(data)
            with contextlib.suppress(OSError):
                os.close(self.out_r)
            self.out_r = None
        for fd in (self.to_worker, self.from_worker):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.kernel is not None:
            self.kernel.close()
        return killed
