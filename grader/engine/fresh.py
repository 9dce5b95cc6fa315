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
import os
import pickle
import select
import signal
import struct
import sys
import time
from typing import Any, Callable, Optional

from grader.engine import hangs, loader

__all__ = ["start", "run_fresh", "origin", "FreshProcessDied", "served_here", "server_pid"]

_server: Optional[tuple] = None   # (pid, fd to write requests, fd to read replies), once started
_HEADER = struct.Struct("<Q")
_REQUEST = struct.Struct("<Qdq")  # a request's size, how long its child may run (0: no limit), its tag
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


def server_pid() -> Optional[int]:
    """The fork server's pid in this process, if one runs: a sweep of this process's children must
    leave it (and the children it keeps ready) alone, or every later fresh job finds it gone."""
    return _server[0] if _server is not None else None


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


def _receive(fd: int, tag: int) -> Any:
    """The answer to request ``tag``. Answers to other requests are skipped: their caller was
    interrupted (Ctrl-C) before it read them, or was a fork of this process that shared the server."""
    while True:
        size, got = _REPLY.unpack(_read_exact(fd, _REPLY.size))
        data = _read_exact(fd, size)
        if got == tag:
            return pickle.loads(data)


def start() -> None:
    """Start the fork server, once per process, before any learner file is imported here.

    Its memory is this process's as it is now: the kit, pytest, Hypothesis, and nothing of a
    learner's code. It only ever forks children, so it stays that way.
    """
    global _server
    if _server is not None or _in_child or not hasattr(os, "fork"):
        return
    if loader.MADE:
        raise RuntimeError("grader.engine.fresh was started after a learner's file was imported in this process "
                           "(a kit bug: import grader.engine.fresh before the first import_file)")
    requests_r, requests_w = os.pipe()
    replies_r, replies_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the server
        try:
            os.close(requests_w)
            os.close(replies_r)
            _serve(requests_r, replies_w)
        finally:
            os._exit(0)
    os.close(requests_r)
    os.close(replies_w)
    for fd in (requests_w, replies_r):
        os.set_inheritable(fd, False)
    _server = (pid, requests_w, replies_r)
    atexit.register(_stop, pid)


def _stop(pid: int) -> None:
    """At exit: end the server (its requests pipe closes) and reap it, so no process outlives this one.
    A server still waiting on a job (this process was interrupted in one) gets a second, then is killed."""
    global _server
    if _server is None or _server[0] != pid or os.getpid() == pid:
        return
    for fd in _server[1:]:
        try:
            os.close(fd)
        except OSError:
            pass
    _server = None
    try:
        for _ in range(100):
            if os.waitpid(pid, os.WNOHANG)[0]:
                return
            time.sleep(0.01)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ChildProcessError, ProcessLookupError):
        pass  # not this process's child (a fork of the process that started it), or reaped already


def _reset_signals() -> None:
    # The server may have been forked inside a time limit or a trace: none of it holds here.
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it closes the pipe
    sys.settrace(None)
    hangs.reset_after_fork()


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


def _serve(requests: int, replies: int) -> None:
    _reset_signals()
    # Every object here is shared with the children until one writes to it. A collection in a child
    # would walk (and so copy) them all: they are left out of it, and a child, which runs one job
    # and exits, collects nothing.
    gc.freeze()
    spare = _spare(requests, replies)
    while True:
        try:
            head = _read_exact(requests, _REQUEST.size)
        except EOFError:
            os.kill(spare[0], signal.SIGKILL)
            os.waitpid(spare[0], 0)
            return
        size, hard, tag = _REQUEST.unpack(head)
        request = _read_exact(requests, size)
        if os.waitpid(spare[0], os.WNOHANG)[0]:  # the spare died waiting (killed from outside): a new one
            for fd in spare[1:]:
                os.close(fd)
            spare = _spare(requests, replies)
        child, in_w, out_r = spare
        try:
            _write_all(in_w, _HEADER.pack(size) + request)
        except OSError:
            pass  # the child is gone already: its exit status says why
        os.close(in_w)
        deadline = time.monotonic() + hard if hard else None
        try:
            answer, status = _answer_of(child, out_r, deadline)
        finally:
            os.close(out_r)
        reaped = status is not None
        if answer is None:
            if not reaped:
                _, status = os.waitpid(child, 0)
                reaped = True
            answer = pickle.dumps(("died", _exit_words(status, hard)))
        _write_all(replies, _REPLY.pack(len(answer), tag) + answer)
        spare = _spare(requests, replies)  # while the caller reads the answer
        if not reaped:
            os.waitpid(child, 0)


def _whole(got: bytearray) -> Optional[bytes]:
    """The answer in ``got`` (its size first), or None while part of it is still to come."""
    if len(got) < _HEADER.size:
        return None
    size, = _HEADER.unpack_from(got)
    return bytes(got[_HEADER.size:_HEADER.size + size]) if len(got) - _HEADER.size >= size else None


def _answer_of(child: int, out_r: int, deadline: Optional[float]) -> tuple[Optional[bytes], Optional[int]]:
    """``(answer, exit status)``: the child's whole answer (None if it ended or ran out of time without
    one; it is then killed), and its exit status if it was reaped here. The answer is sized, so a
    process the child started and left running (and which holds the pipe) cannot make this wait."""
    got = bytearray()
    while True:
        answer = _whole(got)
        if answer is not None:
            return answer, None
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            os.kill(child, signal.SIGKILL)
            return None, None
        if select.select([out_r], [], [], 0.05 if left is None else min(left, 0.05))[0]:
            chunk = os.read(out_r, 1 << 20)
            if not chunk:
                return None, None  # everyone holding the pipe is gone: no whole answer came
            got += chunk
            continue
        done, status = os.waitpid(child, os.WNOHANG)
        if done:  # it ended; what it wrote before is still in the pipe
            while select.select([out_r], [], [], 0)[0]:
                chunk = os.read(out_r, 1 << 20)
                if not chunk:
                    break
                got += chunk
            return _whole(got), status


def _exit_words(status: int, hard: Optional[float]) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGKILL and hard:
            return f"it was still running {hard:g} s after it started, and was killed"
        return f"the process was ended by signal {signal.Signals(sig).name}"
    return f"the process exited (status {os.WEXITSTATUS(status)}) before it answered"


def _run_job(request: tuple) -> bytes:
    job, args, path, name, module_name, settings, cwd, known, limit = request
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
            module = loader.import_file(path, tag="fresh", name=module_name)
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

class Twin:
    """An argument that names something of the learner's module: the fresh module's own is used."""

    def __init__(self, name: str, default: Any = None):
        self.name, self.default = name, default


def origin(fn: Any, module: Any = None) -> Optional[tuple[str, str]]:
    """``(file, name)``: where a fresh child finds ``fn`` again, or None if it is not a learner's.

    ``fn`` is found by identity among its module's names (``resume_agent = _impl`` finds
    ``resume_agent``), in ``module`` if given, else in the globals of the function (or of a bound
    method's function, or of a callable object's ``__call__``).
    """
    space = vars(module) if module is not None else None
    if space is None:
        target = getattr(fn, "__func__", fn)
        while isinstance(target, functools.partial):  # `resume_agent = partial(_resume, ...)`: the module of _resume
            target = target.func
        space = getattr(target, "__globals__", None)
        if space is None:
            call = vars(type(fn)).get("__call__")  # a callable object: its class's method
            space = getattr(call, "__globals__", None)
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
    where = origin(fn, module)
    fresh = getattr(fn, "in_a_fresh_process", None)
    if where is None and callable(fresh) and type(fn).__module__.startswith("grader."):
        # A stand-in for code in the sandbox (grader.grading.stand_in): its worker makes each call afresh.
        return job(fresh(), *args)
    if where is None or _server is None or _in_child:
        # Not a learner's file (a kit test's own function), or no fork here: nothing to start afresh.
        return job(fn, *args)
    space = vars(module) if module is not None else None
    sent = []
    for arg in args:
        if isinstance(arg, type) and (space is not None and space.get(arg.__name__) is arg
                                      or getattr(arg, "__module__", None) in loader.MADE):
            sent.append(Twin(arg.__name__, Exception))
        else:
            sent.append(arg)
    known = hangs.current_hangs()
    limit = hangs.loop_timeout()
    longest = max(limit, timeout or 0)
    hard = 2 * (longest + GRACE)  # the import, then the job's call
    try:
        cwd: Optional[str] = os.getcwd()
    except OSError:  # the folder this process was in is gone (a check's temp folder): the child stays where it starts
        cwd = None
    request = (job, tuple(sent), where[0], where[1], module_name, dict(settings or {}), cwd, known, limit)
    _, to_server, from_server = _server
    tag = int.from_bytes(os.urandom(7), "little")
    data = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
    _write_all(to_server, _REQUEST.pack(len(data), hard or 0.0, tag) + data)
    answer = _receive(from_server, tag)
    if answer[0] == "died":
        raise FreshProcessDied(answer[1])
    hangs.absorb(answer[2])
    if answer[0] == "raised":
        raise FreshProcessDied(f"the fresh process could not run the check: {answer[1]}")
    return answer[1]


if not loader.MADE:
    loader.BEFORE_FIRST_IMPORT.append(start)
