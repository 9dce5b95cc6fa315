"""A process that never saw the run: where every resume and every load of a crash state runs.

After a real crash only the files are left. A resume or a loader judged in the process that ran
the loop (or that resumed from an earlier crash state) could find the state in memory instead:
in a module global, in ``sys``, in builtins, in a cache, in an open descriptor. So each one runs in
a child forked from a clean parent: a *fork server* started before the first learner file was
imported (:func:`start`, which :func:`grader.engine.loader.import_file` calls). The child imports
the learner's file afresh, runs one job, sends back what the job returned as data, and exits.

:func:`run_fresh` is the one entry point. Under ``crashcourse grade`` the learner's functions are
stand-ins for code that runs in the sandbox (they have ``in_a_fresh_process``): the job then runs
here, and each call it makes is run by the sandboxed worker in a child of its own clean parent.

Where there is no ``fork`` (Windows), the job runs in this process, as before.
"""

from __future__ import annotations

import atexit
import functools
import gc
import marshal
import os
import pickle
import select
import signal
import struct
from collections import deque
import sys
import time
from typing import Any, Callable, Iterable, Iterator, Optional

from grader.engine import hangs, loader

__all__ = ["start", "run_fresh", "run_fresh_each", "Call", "width", "origin", "FreshProcessDied", "served_here", "server_pids", "usable_cores", "namespace"]

# The fork servers, once started: (pid, fd to write requests, fd to read replies) each. One per core
# (four at most), so the crash states of one exploration can run side by side (run_fresh_each): each
# server forks one child at a time, and a fork of a process this size is itself milliseconds of work.
_servers: list = []
_busy: dict = {}   # server index -> tags sent to it and not yet answered
_HEADER = struct.Struct("<Q")
_REQUEST = struct.Struct("<Qdq")  # a request's size, how long its child may run (0: no limit; < 0: cancel it), its tag
_REPLY = struct.Struct("<Qq")     # an answer's size, and the tag of the request it answers
# Past its own time limit (which the child enforces, saying where the code was), a child that still
# has not answered is killed: a learner's code may catch the stop, or block the signal.
GRACE = 5.0


class FreshProcessDied(Exception):
    """The child running a job ended without an answer (killed, or it exited from inside the code)."""


def served_here() -> bool:
    """True inside a child of the fork server (a job may want to know it cannot reach the parent)."""
    return _in_child


_in_child = False


def server_pids() -> tuple[int, ...]:
    """The fork servers' pids in this process (none if they were never started): a sweep of this
    process's children must leave them (and the children they keep ready) alone, or every later fresh
    job finds them gone."""
    return tuple(server[0] for server in _servers)


# -- the server --------------------------------------------------------------------------------------------

def _read_exact(fd: int, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


_early: dict = {}      # answers read while this process waited for another one it sent, by tag
_awaited: set = set()  # tags sent from this process whose answers are still wanted


def _receive(server: int, tag: int) -> Any:
    """The answer to request ``tag``, sent to ``server``. An answer to another request this process
    still waits for is kept for it (several run at once, and end in any order); any other is
    skipped: its caller stopped waiting (it stopped early, or Ctrl-C), or was a fork of this process
    that shared the server. A request counts as the server's work until its answer is read."""
    fd = _servers[server][2]
    try:
        while tag not in _early:
            size, got = _REPLY.unpack(_read_exact(fd, _REPLY.size))
            data = _read_exact(fd, size)
            _busy[server].discard(got)
            if got in _awaited:
                _early[got] = data
        return pickle.loads(_early.pop(tag))
    finally:
        _awaited.discard(tag)
        _early.pop(tag, None)


def start(servers: Optional[int] = None, send_code: bool = True) -> None:
    """Start the fork servers (``servers`` of them, one per core by default), once per process,
    before any learner file is imported here. ``send_code``: send each child the learner's file
    compiled here (:func:`_compiled`), or let it compile the file itself (in the grading box, where
    every byte through a pipe is printed in the kernel trace, and the trace is capped).

    Their memory is this process's as it is now: the kit, and under pytest pytest and Hypothesis too
    (``watch`` starts them before it imports those), and nothing of a learner's code. They only ever
    fork children, so it stays that way.
    """
    global _send_code
    if _servers or _in_child or not hasattr(os, "fork"):
        return
    _send_code = send_code
    if loader.MADE:
        raise RuntimeError("grader.engine.fresh was started after a learner's file was imported in this process "
                           "(a kit bug: import grader.engine.fresh before the first import_file)")
    for _ in range(servers or _width()):
        requests_r, requests_w = os.pipe()
        replies_r, replies_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # a server: it sees no other server's pipes, so neither do the children it forks
            try:
                for fd in [requests_w, replies_r] + [fd for server in _servers for fd in server[1:]]:
                    os.close(fd)
                _serve(requests_r, replies_w)
            finally:
                os._exit(0)
        os.close(requests_r)
        os.close(replies_w)
        for fd in (requests_w, replies_r):
            os.set_inheritable(fd, False)
        _servers.append((pid, requests_w, replies_r))
        _busy[len(_servers) - 1] = set()
    atexit.register(_stop, os.getpid())


def _stop(owner: int) -> None:
    """At exit: end the servers (their requests pipes close) and reap them, so no process outlives this
    one. A server still waiting on a job (this process was interrupted in one) gets a second, then is
    killed. Only the process that started them stops them (not a fork of it that exits)."""
    if os.getpid() != owner or not _servers:
        return
    servers = list(_servers)
    _servers.clear()
    for _pid, *fds in servers:
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass
    ends = time.monotonic() + 1.0
    for pid, *_ in servers:
        try:
            while not os.waitpid(pid, os.WNOHANG)[0]:
                if time.monotonic() > ends:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    break
                time.sleep(0.01)
        except (ChildProcessError, ProcessLookupError):
            pass  # reaped already


def _reset_signals() -> None:
    # The server may have been forked inside a time limit or a trace: none of it holds here.
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it closes the pipe
    sys.settrace(None)
    hangs.reset_after_fork()


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the system says, else every core)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _width() -> int:
    """How many fork servers to start: one per core this process may use, four at most."""
    return min(4, usable_cores())


def _spare(requests: int, replies: int) -> tuple[int, int, int]:
    """Fork the child that will run the next job, before the job is known: ``(pid, fd to send it the
    request, fd to read its answer)``. Forking a process the size of a pytest run takes milliseconds;
    done ahead, it overlaps with the caller's own work on the last answer."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    child = os.fork()
    if child == 0:
        global _in_child
        # The job sees none of the server's pipes: it reads its one request and answers once.
        for fd in (requests, replies, in_w, out_r):
            os.close(fd)
        _in_child = True
        gc.disable()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        code = 0
        try:
            request = _read_exact(in_r, _HEADER.unpack(_read_exact(in_r, _HEADER.size))[0])
            answer = _run_job(pickle.loads(request))
            # Sized: a process the learner's code forked (a daemon) holds this pipe open too, so the
            # server cannot wait for its end to know the answer is whole.
            _write_all(out_w, _HEADER.pack(len(answer)) + answer)
            os.close(out_w)
        except BaseException:  # noqa: BLE001 - nothing may escape into the server's loop
            code = 1
        finally:
            os._exit(code)
    os.close(in_r)
    os.close(out_w)
    return child, in_w, out_r


class _Running:
    """The job a server has handed to a child, until it is answered."""

    def __init__(self, child: int, out_r: int, hard: float):
        self.child, self.out_r, self.hard = child, out_r, hard
        self.deadline = time.monotonic() + hard if hard else None
        self.got = bytearray()
        self.status: Optional[int] = None   # its exit status, once reaped


def _serve(requests: int, replies: int) -> None:
    _reset_signals()
    # Every object here is shared with the children until one writes to it. A collection in a child
    # would walk (and so copy) them all: they are left out of it, and a child, which runs one job
    # and exits, collects nothing.
    gc.freeze()
    spare = _spare(requests, replies)
    queue: deque = deque()   # requests that came while a job ran
    while True:
        message = queue.popleft() if queue else _message(requests)
        if message is None:  # the caller is gone
            _kill(spare[0])
            return
        hard, tag, request = message
        if request is None:  # a cancel for a job not running (answered already): nothing to do
            continue
        if os.waitpid(spare[0], os.WNOHANG)[0]:  # the spare died waiting (killed from outside): a new one
            for fd in spare[1:]:
                os.close(fd)
            spare = _spare(requests, replies)
        child, in_w, out_r = spare
        try:
            _write_all(in_w, _HEADER.pack(len(request)) + request)
        except OSError:
            pass  # the child is gone already: its exit status says why
        os.close(in_w)
        run = _Running(child, out_r, hard)
        try:
            answer = None
            while answer is None:
                ready = select.select([out_r, requests], [], [], _next_look(run))[0]
                if requests in ready:  # while it runs: the next request, or a cancel
                    message = _message(requests)
                    if message is None:
                        _kill(child)
                        _kill(spare[0])
                        return
                    if message[2] is not None:
                        queue.append(message)
                    elif message[1] == tag:  # its caller stopped waiting for it: it ends now
                        _kill(child)
                        run.status = 0
                        answer = pickle.dumps(("died", "it was stopped: its answer was no longer wanted"))
                        break
                    else:  # a cancel for a request still queued here: it never starts (no one reads its answer)
                        queue = deque(queued for queued in queue if queued[1] != message[1])
                answer = _progress(run, out_r in ready)
        finally:
            os.close(out_r)
        _write_all(replies, _REPLY.pack(len(answer), tag) + answer)
        spare = _spare(requests, replies)  # while the caller reads the answer
        if run.status is None:
            os.waitpid(child, 0)


def _message(requests: int) -> Optional[tuple[float, int, Optional[bytes]]]:
    """The next message from the caller: ``(time limit, tag, request)``, where a request of None
    cancels the job of that tag; None when the caller has closed its end."""
    try:
        size, hard, tag = _REQUEST.unpack(_read_exact(requests, _REQUEST.size))
        return (hard, tag, None) if hard < 0 else (hard, tag, _read_exact(requests, size))
    except EOFError:
        return None


def _next_look(run: _Running) -> float:
    """How long the server may wait for the child: until its deadline, and 50 ms at most (a child that
    died leaves its pipe open if a process it started holds it; only its exit status says so)."""
    return 0.05 if run.deadline is None else max(0.0, min(0.05, run.deadline - time.monotonic()))


def _progress(run: _Running, readable: bool) -> Optional[bytes]:
    """The answer to send for ``run`` if it is finished (its whole answer, or why it died), else None."""
    if readable:
        chunk = os.read(run.out_r, 1 << 20)
        if not chunk:  # everyone holding the pipe is gone: no whole answer came, unless it is all here
            return _whole(run.got) or _died(run)
        run.got += chunk
    answer = _whole(run.got)
    if answer is not None:
        return answer
    if run.deadline is not None and time.monotonic() >= run.deadline:
        _kill(run.child)
        run.status = 0
        return pickle.dumps(("died", _exit_words(None, run.hard)))
    done, status = os.waitpid(run.child, os.WNOHANG)
    if done:  # it ended; what it wrote before is still in the pipe
        run.status = status
        while select.select([run.out_r], [], [], 0)[0]:
            chunk = os.read(run.out_r, 1 << 20)
            if not chunk:
                break
            run.got += chunk
        return _whole(run.got) or _died(run)
    return None


def _died(run: _Running) -> bytes:
    if run.status is None:
        done, status = os.waitpid(run.child, os.WNOHANG)
        if not done:  # it closed its answer's pipe and runs on: it cannot answer any more
            os.kill(run.child, signal.SIGKILL)
            _, status = os.waitpid(run.child, 0)
        run.status = status
    return pickle.dumps(("died", _exit_words(run.status, run.hard)))


def _kill(child: int) -> None:
    try:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
    except (ChildProcessError, ProcessLookupError):
        pass


def _whole(got: bytearray) -> Optional[bytes]:
    """The answer in ``got`` (its size first), or None while part of it is still to come."""
    if len(got) < _HEADER.size:
        return None
    size, = _HEADER.unpack_from(got)
    return bytes(got[_HEADER.size:_HEADER.size + size]) if len(got) - _HEADER.size >= size else None


def _exit_words(status: Optional[int], hard: Optional[float]) -> str:
    if status is None:  # killed here, past its time
        return f"it was still running {hard:g} s after it started, and was killed"
    if os.WIFSIGNALED(status):
        # Not a job stopped past its time (that is said above): the code's own kill, the machine's
        # (out of memory), or this server's of a child that closed its answer's pipe and ran on.
        return f"the process was ended by signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"the process exited (status {os.WEXITSTATUS(status)}) before it answered"


def _run_job(request: tuple) -> bytes:
    job, args, path, code, name, module_name, settings, cwd, known, limit, pytest_variables = request
    for variable, value in pytest_variables.items():  # as the caller has them (see Call.send)
        if value is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = value
    hangs.LOOP_TIMEOUT = limit
    hangs.adopt(known)
    mark = hangs.hang_mark()
    try:
        if cwd is not None:
            os.chdir(cwd)
    except OSError:
        pass
    try:
        with hangs.time_limit(limit, owner=path):  # a top level that never ends
            module = loader.import_file(path, tag="fresh", name=module_name, code=code)
        for key, value in settings.items():
            setattr(module, key, value)
        fn = getattr(module, name)
        args = tuple(getattr(module, a.name, a.default) if isinstance(a, Twin) else a for a in args)
        value = job(fn, *args)
        answer: tuple = ("ok", value, hangs.hangs_since(mark))
    except BaseException as exc:  # noqa: BLE001 - said as data; the parent decides what it means
        answer = ("raised", f"{type(exc).__name__}: {exc}", hangs.hangs_since(mark))
    try:
        return pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - a value that cannot travel is a kit bug, said as such
        return pickle.dumps(("raised", f"the answer could not be sent back ({exc})", []))


# -- the caller's side ---------------------------------------------------------------------------------------

def width() -> int:
    """How many jobs :func:`run_fresh_each` runs at once here: one per fork server (1 where none runs)."""
    return max(1, len(_servers))


class Twin:
    """An argument that names something of the learner's module: the fresh module's own is used."""

    def __init__(self, name: str, default: Any = None):
        self.name, self.default = name, default


def namespace(fn: Any, module: Any = None) -> Optional[dict]:
    """The globals of ``module`` if given, else of the function (or of a bound method's function, of a
    partial's, or of a callable object's ``__call__``): where the learner's names for ``fn`` live."""
    if module is not None:
        return vars(module)
    target = getattr(fn, "__func__", fn)
    while isinstance(target, functools.partial):  # `resume_agent = partial(_resume, ...)`: the module of _resume
        target = target.func
    space = getattr(target, "__globals__", None)
    if space is None:
        call = vars(type(fn)).get("__call__")  # a callable object: its class's method
        space = getattr(call, "__globals__", None)
    return space if isinstance(space, dict) else None


def origin(fn: Any, module: Any = None) -> Optional[tuple[str, str]]:
    """``(file, name)``: where a fresh child finds ``fn`` again, or None if it is not a learner's.

    ``fn`` is found by identity among its module's names (``resume_agent = _impl`` finds
    ``resume_agent``), in ``module`` if given, else in the globals of the function (or of a bound
    method's function, or of a callable object's ``__call__``).
    """
    space = namespace(fn, module)
    if not isinstance(space, dict) or space.get("__name__") not in loader.MADE or not space.get("__file__"):
        return None
    name = next((k for k, v in space.items() if v is fn and not k.startswith("__")), getattr(fn, "__name__", None))
    return (space["__file__"], name) if isinstance(name, str) else None


def run_fresh(job: Callable[..., Any], fn: Any, *args: Any, module: Any = None, settings: Optional[dict] = None,
              timeout: Optional[float] = None, module_name: Optional[str] = None) -> Any:
    """``job(fn, *args)``, with ``fn`` as a process that never ran anything of the learner's has it.

    ``job`` must be a module-level function of the kit, and what it returns plain data (it crosses
    a pipe). An argument that is the learner's (its ``CheckpointError``) is looked up by name in the
    fresh module. ``settings`` are module-level values set after the fresh import (``MAX_TURNS``).
    ``timeout`` is the limit the job's calls run under: past it and :data:`GRACE`, the child is killed.
    ``module_name``: the name the fresh module is imported under (the sandbox's worker keeps its own).
    Hangs the child met are remembered here, as if the code had got stuck in this process.
    """
    value, died = next(run_fresh_each([Call(job, fn, args, module=module, settings=settings, timeout=timeout,
                                            module_name=module_name)]))
    if died is not None:
        raise died
    return value


class Call:
    """One job for :func:`run_fresh_each`: what :func:`run_fresh` is given, kept to be sent later."""

    def __init__(self, job: Callable[..., Any], fn: Any, args: tuple = (), *, module: Any = None,
                 settings: Optional[dict] = None, timeout: Optional[float] = None,
                 module_name: Optional[str] = None):
        self.job, self.fn, self.args, self.module = job, fn, tuple(args), module
        self.settings, self.timeout, self.module_name = dict(settings or {}), timeout, module_name
        self.where = origin(fn, module)   # (file, name) of a learner's function, else None

    def here(self) -> Optional[Callable[[], Any]]:
        """How to run it in this process, when there is nothing to start afresh; None if it goes to the server."""
        fresh = getattr(self.fn, "in_a_fresh_process", None)
        where = self.where
        if where is None and callable(fresh) and type(self.fn).__module__.startswith("grader."):
            # A stand-in for code in the sandbox (grader.grading.stand_in): its worker makes each call afresh.
            return lambda: self.job(fresh(), *self.args)
        if where is None or not _servers or _in_child:
            # Not a learner's file (a kit test's own function), or no fork here: nothing to start afresh.
            return lambda: self.job(self.fn, *self.args)
        return None

    def send(self) -> tuple[int, int]:
        """Send it to the least busy fork server: ``(that server's index, the tag its answer will carry)``."""
        where = self.where
        # A class of the learner's (its CheckpointError) goes across by name, looked up again in the fresh
        # module: it may be defined in a helper module the learner imports, which the child can only
        # import once the learner's folder is on its path (pickling it by reference would fail first).
        space = namespace(self.fn, self.module) if self.where is not None else None
        sent = []
        for arg in self.args:
            if isinstance(arg, type) and (space is not None and space.get(arg.__name__) is arg
                                          or getattr(arg, "__module__", None) in loader.MADE):
                sent.append(Twin(arg.__name__, Exception))
            else:
                sent.append(arg)
        limit = hangs.loop_timeout()
        hard = 2 * (max(limit, self.timeout or 0) + GRACE)  # the import, then the job's call
        try:
            cwd: Optional[str] = os.getcwd()
        except OSError:  # the folder this process was in is gone (a check's temp folder): the child stays where it starts
            cwd = None
        # pytest's two variables as this process has them now (the test running, pytest's version): the
        # child imports the file during this test, as a learner's own pytest imports it. Nothing else of
        # this process's environment, which the code may have changed, goes across.
        request = (self.job, tuple(sent), where[0], _compiled(where[0]) if _send_code else None, where[1],
                   self.module_name, self.settings, cwd, hangs.current_hangs(), limit,
                   {name: os.environ.get(name) for name in PYTEST_VARIABLES})
        tag = int.from_bytes(os.urandom(7), "little")
        data = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
        server = min(_busy, key=lambda i: len(_busy[i]))
        _awaited.add(tag)
        _busy[server].add(tag)
        _write_all(_servers[server][1], _REQUEST.pack(len(data), hard or 0.0, tag) + data)
        return server, tag


PYTEST_VARIABLES = ("PYTEST_CURRENT_TEST", "PYTEST_VERSION")  # what a child takes from its caller's environment
_code: dict = {}  # path -> (what os.stat said of it, its code compiled and marshalled)
_send_code = True


def _compiled(path: str) -> Optional[bytes]:
    """The learner's file compiled once here, for every fresh child to run rather than compile again
    (milliseconds each, hundreds of times an exploration). None if it cannot be: the child then
    compiles it itself, and meets what it raises as the learner would."""
    try:
        seen = os.stat(path)
        key = (seen.st_ino, seen.st_size, seen.st_mtime_ns)
        if path not in _code or _code[path][0] != key:
            with open(path, "rb") as f:
                _code[path] = (key, marshal.dumps(compile(f.read(), path, "exec", dont_inherit=True)))
        return _code[path][1]
    except (OSError, SyntaxError, ValueError):
        return None


def _cancel(server: int, tag: int) -> None:
    try:
        _write_all(_servers[server][1], _REQUEST.pack(0, -1.0, tag))
    except (OSError, IndexError):
        pass  # the servers are stopped already (this process is exiting)


def _answered(sent: tuple[int, int]) -> tuple[Any, Optional[FreshProcessDied]]:
    answer = _receive(*sent)
    if answer[0] == "died":
        return None, FreshProcessDied(answer[1])
    hangs.absorb(answer[2])
    if answer[0] == "raised":
        return None, FreshProcessDied(f"the fresh process could not run the check: {answer[1]}")
    return answer[1], None


_END = object()


def run_fresh_each(calls: Iterable[Optional[Call]], ahead: Optional[int] = None) -> Iterator[tuple[Any, Optional[FreshProcessDied]]]:
    """``(value, None)`` or ``(None, why it died)`` for each call, in order, each run as :func:`run_fresh` runs one.

    Up to ``ahead`` jobs (one per fork server by default) are sent before the first answer is read, so
    they run side by side on the machine's cores: the crash states of one exploration, say. A None
    among the calls waits for every job sent before it to be answered (and read) first. Each is
    still a child of the clean server, which sees nothing of the others. A hang one of them met is
    known only to the jobs sent after its answer came back. Stopping early is safe: the answers
    still to come are skipped.
    """
    ahead = width() if ahead is None else max(1, ahead)
    sent: list = []   # (server, tag) of the jobs sent and not yet answered here, in order
    calls = iter(calls)
    try:
        while True:
            while len(sent) < ahead:
                call = next(calls, _END)
                if call is _END:
                    break
                if call is None:  # wait: the caller needs the answers to the jobs sent to say what comes next
                    while sent:
                        yield _answered(sent.pop(0))
                    continue
                here = call.here()
                if here is not None:  # run where it stands: everything sent before it comes first
                    while sent:
                        yield _answered(sent.pop(0))
                    try:
                        value = here()
                    except FreshProcessDied as died:
                        yield None, died
                    else:
                        yield value, None
                    continue
                sent.append(call.send())
            if not sent:
                return
            yield _answered(sent.pop(0))
    finally:
        # Stopped early: those jobs are stopped, and their answers skipped by whoever reads next from
        # their servers (a job stuck in a learner's loop would otherwise hold its server until its limit).
        for server, tag in sent:
            _awaited.discard(tag)
            _busy[server].discard(tag)
            _cancel(server, tag)


if not loader.MADE:
    loader.BEFORE_FIRST_IMPORT.append(start)
