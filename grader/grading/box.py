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
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

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
        # -S: no site-packages .pth files run at start-up (they cost more than the rest of the start);
        # the site-packages folders are still on the path, for a submission that imports a library.
        # Not -I: its flags (sys.flags.isolated, safe_path...) would tell the code it is graded, and
        # what -I guards against is not there (no PYTHON* variable in the box's environment, no
        # user site without site); the working folder -c puts first on the path is taken off.
        code = (f"import sys, site; sys.path[:] = [{KIT_PARENT!r}] + [p for p in sys.path if p] "
                f"+ site.getsitepackages(); "
                f"from grader.grading.worker import main; "
                f"main(['--read', '{to_worker_r}', '--write', '{from_worker_w}', '--folder', {box.folder!r}{extra}])")
        env = sandbox.scrubbed_env(box.root, box.token)
        os.makedirs(env["HOME"], exist_ok=True)
        os.makedirs(env["TMPDIR"], exist_ok=True)
        if box.boxed:
            # The box's own /tmp (bubblewrap.command: a small tmpfs) is the system temp folder, a file
            # system apart from the submission's folder as on a usual machine: a temp file made there
            # cannot be renamed into the checkpoint folder (EXDEV), and shutil.move copies it instead.
            env["TMPDIR"] = "/tmp"
        argv = [sys.executable, "-S", "-c", code]
        pass_fds = (to_worker_r, from_worker_w)
        self.cgroup = None
        self.consumed = 0  # bytes of whole messages read from the worker (where the kernel trace must reach)
        self.dropped_output = 0  # bytes of output the worker counted but did not write (worker._Capped)
        self.kernel: Optional[kernel_trace.KernelTrace] = None
        if traced:
            self.kernel = kernel_trace.KernelTrace(box.root, keep_calls=inject is not None)
            pass_fds += self.kernel.pass_fds
        wrap = (lambda command, cwd: self.kernel.wrap(command, cwd, inject=inject or ())) \
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
                                                                        box.hide))
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
            # strace runs under the box's cap on one file, and its trace is one: everything the code
            # writes is printed there (to a file, a pipe, /dev/null, the screen), so this bounds what a
            # box can make the judge read, and a run past it is stopped.
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
