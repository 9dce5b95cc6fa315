"""The judge: runs a level's own tests on one submission, without ever importing the submission.

Trust design (why a score cannot be faked from inside a submission)
-------------------------------------------------------------------
Two processes grade each submission, and only one of them runs student code:

* The **judge** (this module) runs ``pytest exercises/levelN`` in-process, with the level's real
  tests, fixtures, crash engine and invariants. It replaces the plugin's ``Submission`` with
  :class:`RemoteSubmission`, so ``submission.load("agent.py")`` returns a stand-in module whose
  functions run somewhere else. Pass or fail, points, and the report are decided here, from data.
* The **worker** (:mod:`grader.grading.worker`) is a separate process in the sandbox of
  :mod:`grader.grading.sandbox`. It imports the student's file and calls its functions when asked. When
  the judge's crash engine is recording (``explore_loop``), the worker records the file operations
  with the same :class:`~grader.engine.recorder.Recorder` and streams them back as plain JSON; the judge
  appends them to its own recorder in order. The scripted model and tools stay in the judge: the
  worker only receives a callback handle, so each model and tool call is recorded by the judge at
  the moment it serves it, and the loop events in the trace cannot be forged or reordered.

What that buys:

* printing fake results, writing a results file: the judge reads neither (the worker's output is
  captured, capped, and shown as output, never parsed);
* ``sys.exit(0)`` or ``os._exit(0)`` anywhere: the judge sees an exception or a dead pipe, never
  a pass; an exit at import fails every test with that reason;
* patching pytest, ``grader.faces.assertions.assert_holds`` or ``_pytest.runner``: those patches land in
  the worker, where no verdict is computed (pytest is not even imported there);
* a thread or a detached process left running: the worker is killed after the run, and every
  process it started is found (session, subreaper, environment marker) and killed;
* a hang or an endless loop: a wall-clock deadline for the whole submission; once it is spent,
  the remaining tests fail at once with the same reason;
* lying about file operations (speaking the worker's wire protocol directly): after each recorded
  call the judge replays the trace and compares it with the files really on disk; a mismatch
  makes the run "unseen", which fails. A lie that leaves the same final files is not caught: that
  would need syscall tracing (see the report).

The worker's data is decoded as JSON with a few tagged forms and checked (kinds of operation,
types of fields); written bytes travel raw after the JSON, by offset. Nothing it sends is
unpickled or evaluated. A model call carries only the messages that changed since the previous
call on the same callback; the judge rebuilds the conversation from what it was sent before and
refuses a call that refers to messages it never received.

Four things a level's tests may do in their own process are carried across:

* files the code opened for reading are replayed as ``open`` audit events in the judge, so a
  check that watches which files a loader read (level 6) sees the same as in-process;
* arguments the code changed (a dict it was given) are merged back into the caller's objects,
  keeping every value that did not change, identity included (level 1 checks that a save leaves
  the loop's live objects in place);
* a module-level value a test sets on the student's module (level 4's ``MAX_TURNS``) is set in
  the worker too, and again after the worker is restarted (:meth:`RemoteModule.__setattr__`);
* a change to ``os`` the kit's own checks make on purpose and mark (level 4 makes ``fsync`` free,
  since it grades resume, not durability) is made in the worker by name
  (:func:`forwarded_patches`, ``grader.grading.worker.FORWARDED``); only names the worker knows are used.

One thing cannot be carried across: a test that patches ``os`` or ``open`` in its own process to
inject a fault (level 3: a failing ``fsync``, a platform without ``O_DIRECTORY``). Such a test is
detected (:func:`patched_by_test`), and only that test is re-run with pytest inside the sandbox,
beside the code (:func:`run_local`); its outcome is labelled in the report, because it was
computed where the submission could have interfered.
"""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import json
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any, Optional

from grader.engine import recorder as recorder_module
from grader.grading import sandbox
from grader.engine.recorder import FS_KINDS, Op
from grader.grading.worker import MAX_MESSAGE, OP_FIELDS, Callback, Stand

KIT_PARENT = str(Path(__file__).resolve().parents[2])
SAFE_MODULES = {"datetime", "decimal", "fractions", "pathlib", "uuid", "collections"}
OUTPUT_SHOWN = 4000


class SandboxProblem(Exception):
    """The submission's process hung, died, or used up its time: the reason a test could not run."""


class Incident(SandboxProblem):
    pass


class NeedsLocalRun(BaseException):
    """The test patched the judge's own process (fault injection), which cannot reach the worker."""


_PRISTINE: dict = {}


def remember_pristine() -> None:
    """Note the os module and open() as they are before any test runs, to spot fault injection."""
    _PRISTINE["os"] = dict(vars(os))
    _PRISTINE["open"] = (builtins.open, __import__("io").open)


def forwarded_patches() -> list:
    """Changes to ``os`` the kit's own checks made on purpose, which the worker makes too (by name)."""
    return sorted({v._crashcourse_forward for v in vars(os).values()
                   if isinstance(getattr(v, "_crashcourse_forward", None), str)})


def patched_by_test() -> list:
    """Names in os (or open) a test has replaced or removed, other than the recorder's own wrappers."""
    if not _PRISTINE:
        return []
    allowed = {id(v) for v in recorder_module._OS_WRAPPERS.values()} | {id(recorder_module.recording_open)}
    now = vars(os)
    out = [f"os.{k}" for k, v in _PRISTINE["os"].items()
           if now.get(k, _PRISTINE) is not v and id(now.get(k)) not in allowed and not k.startswith("_")
           and k != "environ" and not getattr(now.get(k), "_crashcourse_forward", None)]
    if builtins.open is not _PRISTINE["open"][0] and id(builtins.open) not in allowed:
        out.append("open")
    return out


class RemoteObject:
    """Something the worker returned that is not plain data (shown by its type and repr only)."""

    def __init__(self, type_name: str, text: str):
        self.type_name, self.text = type_name, text

    def __repr__(self) -> str:
        return self.text

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, RemoteObject) and (self.type_name, self.text) == (other.type_name, other.text)

    __hash__ = object.__hash__


# -- decoding what the worker sends ---------------------------------------------------------------

_MISSING_OBJECT = ("object", "(an object the grader does not know)")


def message_hook(body: bytes, start: int, objects: Optional[dict] = None):
    """A ``json.loads`` object hook that decodes the worker's tagged forms in the same pass.

    ``{"$B": [offset, length]}`` is bytes sent raw after the JSON (``body[start:]``); ``$t`` a
    tuple, ``$s`` a set, ``$d`` a dict with keys JSON cannot hold, ``$o`` one of the judge's own
    ``objects`` handed to the call, ``$r`` a stand-in for an object that cannot cross, ``$f`` a
    float JSON cannot hold, ``$op`` one file operation. JSON decodes inner objects first, so each
    tag sees its contents already decoded. Anything else stays a plain dict.
    """
    end = len(body)
    objects = {} if objects is None else objects

    def hook(obj: dict) -> Any:
        if len(obj) != 1:
            return obj
        (tag, inner), = obj.items()
        if tag == "$B":
            if isinstance(inner, list) and len(inner) == 2 and all(type(n) is int and n >= 0 for n in inner) \
                    and start + inner[0] + inner[1] <= end:
                return body[start + inner[0]:start + inner[0] + inner[1]]
            raise ValueError("a reference to bytes outside the message")
        if tag == "$t" and isinstance(inner, list):
            return tuple(inner)
        if tag == "$s" and isinstance(inner, list):
            try:
                return frozenset(inner)
            except TypeError:
                return RemoteObject("set", "(a set of unhashable values)")
        if tag == "$d" and isinstance(inner, list):
            out = {}
            for pair in inner:
                if isinstance(pair, list) and len(pair) == 2:
                    try:
                        out[pair[0]] = pair[1]
                    except TypeError:
                        out[repr(pair[0])] = pair[1]
            return out
        if tag == "$o" and type(inner) is int:
            return objects[inner] if inner in objects else RemoteObject(*_MISSING_OBJECT)
        if tag == "$r" and isinstance(inner, list) and len(inner) == 2:
            return RemoteObject(str(inner[0]), str(inner[1]))
        if tag == "$f" and inner in ("nan", "inf", "-inf"):
            return float(inner)
        if tag == "$op" and isinstance(inner, list) and len(inner) == len(OP_FIELDS):
            return _decode_op(dict(zip(OP_FIELDS, inner)))
        return obj

    return hook


def unframe(data: bytes, objects: Optional[dict] = None) -> Any:
    """One whole message from the worker (see :func:`grader.grading.worker.frame`), decoded; None if unreadable."""
    if len(data) < 8:
        return None
    head, blob_size = struct.unpack(">II", data[:8])
    if len(data) != 8 + head + blob_size:
        return None
    try:
        return json.loads(data[8:8 + head], object_hook=message_hook(data, 8 + head, objects))
    except (ValueError, RecursionError):
        return None


def _decode_op(values: dict) -> Optional[Op]:
    kind = values.get("kind")
    if kind not in FS_KINDS and kind != "flush":
        return None  # loop events are recorded by the judge alone

    def text(v: Any) -> Optional[str]:
        return v if isinstance(v, str) else None

    def number(v: Any, default: Optional[int] = 0) -> Optional[int]:
        return v if isinstance(v, int) and not isinstance(v, bool) else default

    flags = values.get("flags")
    return Op(0, kind, api=text(values.get("api")) or "", path=text(values.get("path")), dest=text(values.get("dest")),
              handle=number(values.get("handle"), None), offset=number(values.get("offset"), None),
              data=values.get("data") if isinstance(values.get("data"), bytes) else b"",
              size=number(values.get("size")) or 0,
              flags=frozenset(f for f in flags if isinstance(f, str)) if isinstance(flags, frozenset) else frozenset(),
              is_dir=values.get("is_dir") is True, payload=None, note="")


# -- one submission's box -----------------------------------------------------------------------

class Box:
    """One submission's sandbox as the judge sees it: the folder, the deadline, the worker."""

    def __init__(self, folder: str, root: str, token: str, timeout: float, limits: Optional[sandbox.Limits] = None,
                 read_only: Optional[bool] = None, hide: tuple = ()):
        self.hide = tuple(hide)
        self.folder = os.path.realpath(folder)
        self.root = os.path.realpath(root)
        self.token = token
        self.timeout = timeout
        self.spent = 0.0  # seconds spent waiting on the submission's code (the judge's own work is free)
        self.limits = limits or sandbox.Limits(cpu_seconds=int(timeout) + 10)
        self.read_only = read_only
        self.worker: Optional[Worker] = None
        self.generation = 0
        self.expired: Optional[str] = None
        self.incidents: dict[str, str] = {}
        self.current = ""
        self.output = bytearray()
        self.output_dropped = 0
        self.load_failures: dict[str, str] = {}
        self.calls = 0
        self.needs_local: set = set()

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

    def __init__(self, box: Box, pytest_args: Optional[list] = None, cwd: Optional[str] = None):
        self.box = box
        to_worker_r, self.to_worker = os.pipe()
        self.from_worker, from_worker_w = os.pipe()
        self.out_r, out_w = os.pipe()
        extra = f", '--pytest', {json.dumps(pytest_args)!r}" if pytest_args is not None else ""
        # -S: no site-packages .pth files run at start-up (they cost more than the rest of the start);
        # the site-packages folders are still on the path, for a submission that imports a library.
        code = (f"import sys, site; sys.path[:0] = [{KIT_PARENT!r}]; sys.path += site.getsitepackages(); "
                f"from grader.grading.worker import main; "
                f"main(['--read', '{to_worker_r}', '--write', '{from_worker_w}', '--folder', {box.folder!r}{extra}])")
        env = sandbox.scrubbed_env(box.root, box.token)
        if pytest_args is not None:
            env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # only the plugins the args name (see LEAN)
        os.makedirs(env["HOME"], exist_ok=True)
        os.makedirs(env["TMPDIR"], exist_ok=True)
        self.proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", code], pass_fds=(to_worker_r, from_worker_w),
                                     stdin=subprocess.DEVNULL, stdout=out_w, stderr=out_w, env=env,
                                     cwd=cwd or env["HOME"],
                                     start_new_session=True,
                                     preexec_fn=sandbox.preexec_for(box.limits, box.root, box.read_only, box.hide))
        for fd in (to_worker_r, from_worker_w, out_w):
            os.close(fd)
        os.set_blocking(self.to_worker, False)
        for fd in (self.from_worker, self.out_r):
            with contextlib.suppress(OSError, AttributeError):
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)  # fewer wake-ups for a chatty worker
        self.sent_messages: dict = {}  # callback -> the messages its last call carried (see _with_kept_messages)
        self.buffer = bytearray(1 << 20)
        self.view = memoryview(self.buffer)
        self.inbox = bytearray()
        self.alive = True
        self.exit_note = ""
        self.read_message("starting", startup=True)

    # pipes
    def send(self, message: dict, what: str) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(struct.pack(">I", len(data)) + data)
        write = recorder_module._real["os.write"]  # the judge's own pipe is not the submission's file
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
            if len(self.inbox) >= 8:
                head, blob_size = struct.unpack(">II", bytes(self.inbox[:8]))
                size = head + blob_size
                if size > MAX_MESSAGE:
                    self.stop()
                    raise Incident(self.box.incident(f"the process running your code sent the grader "
                                                     f"{size} bytes at once while {what}; it was stopped"))
                if len(self.inbox) >= 8 + size:
                    data = bytes(self.inbox[:8 + size])
                    del self.inbox[:8 + size]
                    message = unframe(data, objects)
                    if not isinstance(message, dict):
                        self.stop()
                        raise Incident(self.box.incident(f"the process running your code sent the grader something "
                                                         f"it could not read while {what}"))
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
        self.stop()
        if code is not None and code < 0:
            sig = -code
            why = {signal.SIGXCPU: "it used more CPU time than a submission may",
                   signal.SIGXFSZ: f"it wrote a file larger than {self.box.limits.file_size // 2**20} MiB",
                   signal.SIGKILL: "it was killed (out of memory?)"}.get(sig, f"signal {sig}")
            status = f"ended by {signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else sig}: {why}"
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
        return killed


# -- what the level's tests see in place of the student's module -----------------------------------

class RemoteSubmission:
    """Drop-in for :class:`grader.faces.plugin.Submission`: the same methods, the code runs in the worker."""

    box: Optional[Box] = None

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def path(self, filename: str) -> Path:
        return self.folder / filename

    def load(self, filename: str) -> Any:
        import pytest
        box = self.box
        path = self.path(filename)
        if not path.exists():
            pytest.fail(box.incident(f"There is no {filename} in the submission. The level's tests grade a file "
                                     "with exactly that name."), pytrace=False)
        patched = patched_by_test()
        if patched:
            box.needs_local.add(box.current)
            raise NeedsLocalRun(f"this test replaces {', '.join(patched[:3])} in the test process")
        try:
            return RemoteModule.load(box, filename)
        except Incident as exc:
            problem = box.incident(str(exc))
        pytest.fail(problem, pytrace=False)  # outside the except: the report shows the reason, not a chain

    def function(self, filename: str, name: str) -> Any:
        import pytest
        module = self.load(filename)
        fn = getattr(module, name, None)
        if not callable(fn):
            pytest.fail(self.box.incident(f"{filename} has no function `{name}`; the tests call it by that name."),
                        pytrace=False)
        return fn


class RemoteModule(types.ModuleType):
    """A student's module as the judge sees it: functions that call into the worker, mirrored errors."""

    @classmethod
    def load(cls, box: Box, filename: str) -> "RemoteModule":
        if filename in box.load_failures:
            raise Incident(box.load_failures[filename])
        module = cls(f"submission.{filename}")
        module._box, module._filename = box, filename
        module._reload()
        for attr, info in module._names.items():
            if not isinstance(info, dict) or not isinstance(attr, str) or not attr.isidentifier() \
                    or attr in _INTERNAL or hasattr(RemoteModule, attr):
                continue  # never let a name from the worker replace the stand-in's own machinery
            # Straight into the namespace: setattr on the stand-in would set the name in the worker.
            if info.get("kind") == "function":
                module.__dict__[attr] = RemoteFunction(module, attr)
            elif info.get("kind") == "exception":
                module.__dict__[attr] = module._mirror(attr, info.get("mro") or [])
            elif info.get("kind") == "value":
                module.__dict__[attr] = info.get("value")
            elif info.get("kind") == "class":
                module.__dict__[attr] = RemoteClass(filename, attr)
        return module

    def __setattr__(self, name: str, value: Any) -> None:
        """A check that sets a module-level value (``MAX_TURNS = 2``) sets it where the code runs."""
        if name.startswith("_") or "_ident" not in self.__dict__:
            return super().__setattr__(name, value)
        self._send_value(name, value)
        self.__dict__.setdefault("_overrides", {})[name] = value
        super().__setattr__(name, value)

    def _worker(self) -> "Worker":
        """The box's worker, with this file imported in it (afresh if the earlier process was stopped)."""
        worker = self._box.ensure_worker()
        if self._generation != self._box.generation:
            self._reload()
            worker = self._box.worker
        return worker

    def _send_value(self, name: str, value: Any) -> None:
        box = self._box
        worker = self._worker()
        objects: dict = {}
        payload = _prepare(value, objects)
        if objects:
            raise TypeError(f"the grader can set only plain values in {self._filename} across the sandbox, "
                            f"not {type(value).__name__}")
        what = f"setting {name} in {self._filename}"
        worker.send({"op": "setattr", "module": self._ident, "name": name, "value": payload}, what)
        reply = worker.read_message(what)
        if reply.get("op") != "ok":
            raise Incident(box.incident(f"the process running your code could not set {name} in {self._filename}"))

    def _reload(self) -> None:
        box = self._box
        worker = box.ensure_worker()
        what = f"importing {self._filename}"
        worker.send({"op": "load", "filename": self._filename}, what)
        reply = worker.read_message(what)
        if reply.get("op") != "loaded":
            error = reply.get("error") if isinstance(reply.get("error"), dict) else {}
            reason = _import_problem(self._filename, error)
            box.load_failures[self._filename] = reason
            raise Incident(reason)
        self._ident, self._module_name = reply.get("module"), reply.get("module_name")
        self._names = reply.get("names") if isinstance(reply.get("names"), dict) else {}
        self._generation = box.generation
        self._exceptions = getattr(self, "_exceptions", {})
        for name, value in self.__dict__.get("_overrides", {}).items():
            self._send_value(name, value)  # a fresh worker imported the file afresh: set them again

    def _mirror(self, name: str, mro: list) -> type:
        """The student's exception class, rebuilt in the judge with the same names and ancestry."""
        chain = [(str(item[0]), item[1] is True) for item in (mro if isinstance(mro, list) else [])
                 if isinstance(item, list) and len(item) == 2]
        base: type = Exception
        for cname, here in reversed(chain):
            if not here:
                candidate = getattr(builtins, cname, None)
                if isinstance(candidate, type) and issubclass(candidate, BaseException):
                    base = candidate
                continue
            cls = self._exceptions.get(cname)
            if cls is None:
                cls = type(cname, (base,), {"__module__": self._module_name or "submission"})
                self._exceptions[cname] = cls
            base = cls
        return self._exceptions.get(name, base)

    def _exception(self, error: dict) -> BaseException:
        name = str(error.get("type", "Exception"))
        mro = error.get("mro") if isinstance(error.get("mro"), list) else []
        message = str(error.get("message", ""))
        if error.get("module") == self._module_name and name in self._exceptions:
            cls = self._exceptions[name]
        else:
            base = next((getattr(builtins, n) for n in mro if isinstance(getattr(builtins, n, None), type)
                         and issubclass(getattr(builtins, n), BaseException)), Exception)
            if base in (SystemExit, KeyboardInterrupt, GeneratorExit):
                base = RuntimeError
                message = f"{name}({message}) was raised inside your code"
            cls = base if base.__name__ == name else type(name, (base,), {"__module__": "submission"})
        if name == "MemoryError":
            message = (message + " " if message else "") + \
                f"(a submission may use at most {self._box.limits.memory // 2**30} GiB of memory)"
        where = _last_frame(error.get("where"))
        exc = cls(message + (f" [{where}]" if where else ""))
        return exc


_INTERNAL = {"_box", "_filename", "_names", "_ident", "_module_name", "_generation", "_exceptions", "_overrides"}


class RemoteClass:
    def __init__(self, filename: str, name: str):
        self.filename, self.name = filename, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"the grader cannot build a {self.name} from {self.filename} across the sandbox; "
                        "the level's tests call functions only")


class RemoteFunction:
    """One of the student's functions. Calling it runs it in the worker and returns what it returned."""

    def __init__(self, module: RemoteModule, name: str):
        self.module, self.__name__ = module, name
        self.__qualname__ = name

    def __repr__(self) -> str:
        return f"<function {self.__name__} from {self.module._filename}, run in the sandbox>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        module, box = self.module, self.module._box
        if box.expired:
            raise Incident(box.incident(box.expired))
        patched = patched_by_test()
        if patched:
            box.needs_local.add(box.current)
            raise NeedsLocalRun(f"this test replaces {', '.join(patched[:3])} in the test process")
        worker = module._worker()
        objects: dict = {}
        payload_args = _prepare(list(args), objects)
        payload_kwargs = _prepare(kwargs, objects)
        rec = recorder_module._active
        box.calls += 1
        what = f"running {self.__name__}"
        request = {"op": "call", "module": module._ident, "name": self.__name__, "args": payload_args,
                   "kwargs": payload_kwargs, "cwd": os.getcwd(), "watch": list(rec.watch) if rec is not None else None,
                   "forward": forwarded_patches()}
        handle_base = 1_000_000 * box.calls
        worker.sent_messages = {}  # the worker forgets them too when a call starts
        try:
            worker.send(request, what)
            while True:
                message = worker.read_message(what, objects=objects)
                op = message.get("op")
                if op in ("ops", "callback", "return", "raise"):
                    self._take_ops(rec, message.get("ops"), objects, handle_base)
                if op == "callback":
                    self._serve_callback(worker, message, objects, what)
                    continue
                if op in ("return", "raise"):
                    break
        except BaseException:
            # A timeout signal or an incident mid-call: the worker's state is unknown, so it goes.
            if worker.alive:
                worker.stop()
            raise
        if rec is not None:
            unseen = message.get("unseen")
            if isinstance(unseen, list):
                rec.unseen.extend(str(u)[:500] for u in unseen[:50])
            _compare_with_disk(rec)
        reads = message.get("reads")
        if isinstance(reads, list):
            # Replay the files the code opened for reading, so audit hooks here (a check that
            # watches which files a loader read) see what they would have seen in-process.
            for item in reads[:5000]:
                if isinstance(item, list) and len(item) == 3 and isinstance(item[0], str):
                    sys.audit("open", item[0], item[1] if isinstance(item[1], str) else None,
                              item[2] if isinstance(item[2], int) else None)
        new_args, new_kwargs = message.get("args"), message.get("kwargs")
        if isinstance(new_args, list) and len(new_args) == len(args):
            for old, new in zip(args, new_args):
                _merge(old, new)
        if isinstance(new_kwargs, dict):
            for key, old in kwargs.items():
                if key in new_kwargs:
                    _merge(old, new_kwargs[key])
        if message.get("op") == "raise":
            error = message.get("error") if isinstance(message.get("error"), dict) else {}
            raise module._exception(error)
        return message.get("value")

    @staticmethod
    def _take_ops(rec: Any, ops: Any, objects: dict, handle_base: int) -> None:
        if not isinstance(ops, list) or rec is None:
            return
        for op in ops:
            if not isinstance(op, Op):
                continue
            rec.add(op.kind, api=op.api, path=op.path, dest=op.dest,
                    handle=None if op.handle is None else handle_base + op.handle, offset=op.offset, data=op.data,
                    size=op.size, flags=op.flags, is_dir=op.is_dir)

    def _serve_callback(self, worker: Worker, message: dict, objects: dict, what: str) -> None:
        fn = objects.get(message.get("id"))
        args, kwargs = message.get("args"), message.get("kwargs")
        ident = message.get("id")
        if isinstance(message.get("json"), bytes):  # plain JSON data (see grader.grading.worker.plain_json)
            try:
                args, kwargs = json.loads(message["json"])
                kwargs = _with_kept_messages(kwargs, worker.sent_messages.get(ident), message.get("keep"))
            except (ValueError, TypeError, RecursionError):
                args = kwargs = None
        if not callable(fn) or not isinstance(args, list) or not isinstance(kwargs, dict) \
                or not all(isinstance(k, str) for k in kwargs):
            worker.sent_messages.pop(ident, None)
            worker.send({"op": "error", "type": "TypeError", "mro": ["TypeError", "Exception"],
                         "message": "the grader could not read that call", "resync": True}, what)
            return
        if isinstance(message.get("json"), bytes) and isinstance(kwargs.get("messages"), list):
            worker.sent_messages[ident] = kwargs["messages"]
        else:
            worker.sent_messages.pop(ident, None)
        try:
            value = fn(*args, **kwargs)
        except (Incident, _loop_timeout()):
            raise
        except Exception as exc:  # noqa: BLE001 - the model or a tool refusing: the student's loop sees it
            worker.send({"op": "error", "type": type(exc).__name__, "mro": [c.__name__ for c in type(exc).__mro__],
                         "message": str(exc)}, what)
            return
        worker.send({"op": "value", "value": _prepare(value, objects)}, what)


def _with_kept_messages(kwargs: Any, before: Optional[list], keep: Any) -> Any:
    """``kwargs`` with its ``messages`` put back together: the first ``keep`` from the last call, then
    the ones sent now (see ``Session.unchanged_messages`` in :mod:`grader.grading.worker`)."""
    if keep in (None, 0):
        return kwargs
    if type(keep) is not int or keep < 0 or before is None or keep > len(before) or not isinstance(kwargs, dict) \
            or not isinstance(kwargs.get("messages"), list):
        raise ValueError("the call refers to messages the grader was not sent")
    return dict(kwargs, messages=before[:keep] + kwargs["messages"])


def _loop_timeout() -> type:
    from grader.engine.explore import LoopTimeout
    return LoopTimeout


def _import_problem(filename: str, error: dict) -> str:
    kind = error.get("type")
    if kind in ("SyntaxError", "IndentationError", "TabError"):
        return (f"{filename} has a syntax error on line {error.get('lineno')}: {error.get('msg') or error.get('message')}. "
                "Fix it, then re-run.")
    if kind == "SystemExit":
        return (f"Importing {filename} called sys.exit({json.dumps(error.get('code'))}). A file that ends the "
                "program when it is imported cannot be graded: the grader counts only the checks it saw pass.")
    where = _last_frame(error.get("where"))
    return f"Importing {filename} raised {kind}: {error.get('message')}" + (f" [{where}]" if where else "")


def _last_frame(where: Any) -> str:
    if not isinstance(where, str) or not where.strip():
        return ""
    lines = [line.strip() for line in where.strip().splitlines() if line.strip().startswith("File ")]
    if not lines:
        return ""
    last = lines[-1]
    try:
        path = last.split('"')[1]
        rest = last.split('"', 2)[2].strip(", ")
        return f"{os.path.basename(path)}, {rest}"
    except IndexError:
        return last


def _prepare(value: Any, objects: dict, depth: int = 0) -> Any:
    """What goes to the worker: plain data as it is; callables and live objects as handles."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if depth > 200:
        return None
    if isinstance(value, list):
        return [_prepare(v, objects, depth + 1) for v in value]
    if isinstance(value, tuple) and type(value) is tuple:
        return tuple(_prepare(v, objects, depth + 1) for v in value)
    if isinstance(value, dict) and type(value) is dict:
        return {_prepare(k, objects, depth + 1): _prepare(v, objects, depth + 1) for k, v in value.items()}
    if isinstance(value, (set, frozenset)) and all(isinstance(v, (str, int, float, bytes, bool)) for v in value):
        return value
    ident = id(value)
    objects[ident] = value
    if callable(value) and not isinstance(value, type):
        return Callback(ident, getattr(value, "__name__", "callback"))
    if type(value).__module__ in SAFE_MODULES and not callable(value):
        try:
            pickle.dumps(value)
            return value
        except Exception:  # noqa: BLE001
            pass
    try:
        text = repr(value)[:200]
    except Exception:  # noqa: BLE001
        text = f"<{type(value).__name__}>"
    return Stand(ident, type(value).__name__, text)


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001
        return False


def _merge(old: Any, new: Any) -> None:
    """Bring an argument the function changed back into the caller's object, keeping what did not change."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [k for k in old if k not in new]:
            del old[key]
        for key, value in new.items():
            if key in old and (old[key] is value or _same(old[key], value)):
                continue
            if key in old and isinstance(old[key], (dict, list)) and type(old[key]) is type(value):
                _merge(old[key], value)
            else:
                old[key] = value
    elif isinstance(old, list) and isinstance(new, list):
        if len(old) == len(new):
            for i, value in enumerate(new):
                if old[i] is value or _same(old[i], value):
                    continue
                if isinstance(old[i], (dict, list)) and type(old[i]) is type(value):
                    _merge(old[i], value)
                else:
                    old[i] = value
        else:
            old[:] = new


def _compare_with_disk(rec: Any) -> None:
    """The trace the worker sent must replay to exactly the files that are on disk now."""
    from grader.engine.crash_models import final_listing
    roots = [os.path.realpath(w) for w in rec.watch]
    dirs = {os.path.dirname(p) for op in rec.ops if op.kind in FS_KINDS for p in (op.path, op.dest) if p}
    for directory in sorted(dirs):
        real = os.path.realpath(directory)
        if not any(real == r or real.startswith(r + os.sep) for r in roots):
            continue
        expected = final_listing(rec.ops, rec.initial, directory)
        actual = {}
        if os.path.isdir(directory):
            for name in os.listdir(directory):
                p = os.path.join(directory, name)
                if os.path.isfile(p) and not os.path.islink(p):
                    with recorder_module._real["open"](p, "rb") as f:
                        actual[name] = f.read()
        if expected != actual:
            names = sorted(set(expected) ^ set(actual)) or \
                sorted(n for n in expected if expected.get(n) != actual.get(n))
            rec.unseen.append(f"after the run, the files in {os.path.basename(directory)}/ are not what the recorded "
                              f"operations leave ({', '.join(names[:3])}): something wrote there by a route the "
                              "grader could not see")


# -- running a level's tests as the judge ------------------------------------------------------------

class Collector:
    """A pytest plugin object that keeps each test's outcome, points and text for the report."""

    def __init__(self, box: Box):
        self.box = box
        self.tests: dict[str, dict] = {}
        self.collect_errors: list[str] = []

    def pytest_collection_modifyitems(self, items: list) -> None:
        for item in items:
            points = item.get_closest_marker("points")
            task = item.get_closest_marker("task")
            self.tests[item.nodeid] = {
                "nodeid": item.nodeid, "name": item.name, "status": "error", "output": "the test did not run",
                "max_score": float(points.args[0]) if points is not None and points.args else 0.0,
                "task": (task.kwargs.get("taskno", task.args[0] if task.args else None) if task is not None else None)}

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.collect_errors.append(str(report.longreprtext)[-3000:])

    def pytest_runtest_setup(self, item: Any) -> None:
        self.box.current = item.nodeid

    def pytest_runtest_logreport(self, report: Any) -> None:
        entry = self.tests.get(report.nodeid)
        if entry is None:
            return
        text = str(report.longreprtext or "")
        if report.when == "setup":
            if report.failed:
                entry.update(status="error", output=text)
            elif report.skipped:
                entry.update(status="failed", output="skipped: " + text)
        elif report.when == "call":
            entry.update(status="passed" if report.passed else "failed", output=text if report.failed else "")
        elif report.when == "teardown" and report.failed and entry["status"] == "passed":
            entry.update(status="error", output=text)


def _shorten(text: str, box: Box, names: dict) -> str:
    for old, new in sorted(names.items(), key=lambda item: -len(item[0])):  # longest first: paths nest
        text = text.replace(old, new)
    if len(text) > OUTPUT_SHOWN:
        text = text[:OUTPUT_SHOWN] + f"\n... ({len(text) - OUTPUT_SHOWN} more characters)"
    return text


def written_tasks(level_dir: Path) -> set:
    """Task numbers the level's README marks as written answers for manual review."""
    readme = level_dir / "README.md"
    if not readme.exists():
        return set()
    out, current = set(), None
    for line in readme.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            head = line[3:].strip()
            number = head.split(".", 1)[0]
            current = int(number) if number.isdigit() else None
            if current is not None and "manual review" in head.lower():
                out.add(current)
        elif current is not None and "manual review" in line.lower() and "no automatic points" in line.lower():
            out.add(current)
    return out


# Only the plugins a level's tests use: whatever else is installed (pytest-benchmark asks git for
# the commit on every start) would cost each of hundreds of judges for nothing. Capture and the
# terminal reporter are off because a judge's own output goes nowhere: verdicts and their texts
# come from the test reports (Collector), which do not depend on either.
LEAN = ["-p", "grader.faces.plugin"] + [w for name in ("logging", "junitxml", "pastebin", "doctest", "faulthandler",
                                                 "stepwise", "nose", "legacypath", "capture", "terminal")
                                  for w in ("-p", f"no:{name}")]


def judge_args(level: Path, basetemp: str, folder: str, seed: Optional[int], examples: Optional[int]) -> list:
    """The pytest command line of a judge (the level's folder first)."""
    # The unraisable/thread-exception plugins run gc.collect() after every test: costly in a big heap,
    # and only about the judge's own objects (the student's code never runs here).
    args = [str(level), "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:unraisableexception",
            "-p", "no:threadexception", "--basetemp", basetemp, "--submission", folder,
            "--rootdir", str(level.parent.parent)]
    if seed is not None:
        args += ["--crashcourse-seed", str(seed)]
    if examples is not None:
        args += ["--crashcourse-examples", str(examples)]
    return args


def prepare_config(level_dir: str, seed: Optional[int] = None, examples: Optional[int] = None) -> Any:
    """The judges' pytest configuration, parsed once before they fork (each would spend ~40 ms on it).

    Nothing in it is configured yet: each judge sets its submission's folder and scratch
    directory, then runs the session (:func:`run_judge` with ``config=``).
    """
    try:
        from _pytest.config import _prepareconfig  # pytest's own step before a session; not public API
    except ImportError:
        return None  # each judge then parses its command line itself, as pytest.main does
    level = Path(level_dir).resolve()
    cwd, autoload = os.getcwd(), os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        os.chdir(level.parent.parent)
        return _prepareconfig(judge_args(level, "/nonexistent/basetemp", str(level), seed, examples) + LEAN)
    except Exception:  # noqa: BLE001 - another pytest may want other arguments: fall back the same way
        return None
    finally:
        os.chdir(cwd)
        if autoload is None:
            os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
        else:
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = autoload


def run_judge(level_dir: str, folder: str, root: str, token: str, *, seed: Optional[int] = None,
              timeout: float = 60.0, scenarios: Optional[str] = None, examples: Optional[int] = None,
              student: str = "", read_only: Optional[bool] = None, hide: tuple = (), config: Any = None) -> dict:
    """Grade one submission folder with the level's tests. Returns the submission's report entry.

    ``config``: a configuration from :func:`prepare_config` (same level, seed and examples), which
    this process may use once.
    """
    import pytest
    from grader.faces import plugin

    level = Path(level_dir).resolve()
    kit_root = level.parent.parent
    # Hidden from the student's code: the instructor's scenarios and the kit's solutions.
    hide = tuple(hide) + ((scenarios,) if scenarios else ()) + (str(kit_root / "solutions"),)
    box = Box(folder, root, token, timeout, read_only=read_only, hide=hide)
    RemoteSubmission.box = box
    plugin.Submission = RemoteSubmission  # the level's `submission` fixture now hands out stand-ins
    scratch = os.path.join(box.root, "tmp")
    os.makedirs(scratch, exist_ok=True)
    import tempfile
    tempfile.tempdir = scratch
    os.environ["TMPDIR"] = scratch
    collector = Collector(box)
    args = judge_args(level, os.path.join(box.root, "pytest"), box.folder, seed, examples)
    error = None
    os.chdir(kit_root)
    remember_pristine()
    try:
        if config is not None:
            # Parsed once before the judges forked (see prepare_config): only this submission's
            # folder and scratch directory differ.
            config.option.basetemp = os.path.join(box.root, "pytest")
            config.option.crashcourse_submission = box.folder
            config.pluginmanager.register(collector, "crashcourse-judge-collector")
            os.environ["PYTEST_VERSION"] = pytest.__version__
            try:
                code = config.hook.pytest_cmdline_main(config=config)
            finally:
                config._ensure_unconfigure()
        else:
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
            code = pytest.main(args + LEAN, plugins=[collector])
        if collector.collect_errors:
            error = "the level's tests could not be collected:\n" + collector.collect_errors[0]
        elif code not in (0, 1) and not collector.tests:
            error = f"pytest stopped with exit code {int(code)}"
    except BaseException as exc:  # noqa: BLE001 - the judge reports, it does not crash the batch
        error = f"the grader failed on this submission: {type(exc).__name__}: {exc}"
    local = sorted(n for n in box.needs_local if n in collector.tests)
    if local and error is None:
        run_local(box, local, collector, args[1:], str(kit_root))
    extra = []
    if scenarios:
        extra = run_scenarios(scenarios, box)
    killed = box.shutdown()

    names = {box.folder: student or "<submission>", os.path.relpath(box.folder, kit_root): student or "<submission>",
             box.root: "<sandbox>"}
    written = written_tasks(level)
    tests = []
    for entry in list(collector.tests.values()) + extra:
        reason = box.incidents.get(entry["nodeid"])
        status = entry["status"]
        max_score = entry["max_score"]
        if entry.get("task") in written:
            status, max_score = "manual review", 0.0
        tests.append({"name": entry["name"], "status": status,
                      "score": max_score if status == "passed" else 0.0, "max_score": max_score,
                      "output": _shorten(entry["output"], box, names), "task": entry.get("task"),
                      "reason": _shorten(reason, box, names) if reason else None})
    if (level / "answers.md").exists():
        answers = Path(box.folder) / "answers.md"
        text = answers.read_text(encoding="utf-8", errors="replace")[:OUTPUT_SHOWN] if answers.exists() \
            else "(the submission has no answers.md)"
        tests.append({"name": "answers.md (written part)", "status": "manual review", "score": 0.0,
                      "max_score": 0.0, "output": text, "task": None, "reason": None})
    scored = [t for t in tests if t["status"] != "manual review"]
    score = sum(t["score"] for t in scored)
    max_score = sum(t["max_score"] for t in scored)
    if error is None and not scored:
        error = "the level has no tests with points"
    # Tests share one run of the loop (the `once` fixture), so an incident (a hang, an exit, a
    # crash of the worker) is met by the first test that runs the code; the others fail on its
    # cached result. Nothing passed and something went wrong with the process: an error, with why.
    reasons = [t["reason"] for t in scored if t["reason"]]
    if error is None and reasons and not any(t["status"] == "passed" for t in scored):
        error = reasons[0]
    status = "error" if error else ("passed" if all(t["status"] == "passed" for t in scored) else "failed")
    output = bytes(box.output).decode("utf-8", "replace")
    if box.output_dropped:
        output += f"\n... ({box.output_dropped} more bytes of output were dropped)"
    return {"id": student, "score": score if status != "error" or score else 0.0, "max_score": max_score,
            "status": status, "error": _shorten(error, box, names) if error else None, "tests": tests,
            "stdout": _shorten(output, box, names), "stray_processes": killed}


LOCAL_NOTE = ("(This check injects faults into the process that runs your code, so it ran inside the sandbox "
              "beside your code rather than in the separate grading process.)")


def run_local(box: Box, nodeids: list, collector: Collector, options: list, kit_root: str) -> None:
    """The fallback for fault-injection tests: run them with the code, in the sandbox, and take the outcome."""
    args = list(nodeids) + [o for o in options if o != "--basetemp"]
    if "--basetemp" in options:
        i = options.index("--basetemp")
        args = list(nodeids) + options[:i] + options[i + 2:] + ["--basetemp", os.path.join(box.root, "pytest-local")]
    args += LEAN  # the same few plugins as the judge (the worker's environment turns autoloading off)
    reason = None
    try:
        if box.expired:
            raise Incident(box.expired)
        worker = Worker(box, pytest_args=args, cwd=kit_root)
        try:
            message = worker.read_message("running the checks that inject faults")
        finally:
            worker.stop()
        results = message.get("tests") if message.get("op") == "results" else None
        if not isinstance(results, dict):
            raise Incident("the checks that inject faults did not report back")
    except Incident as exc:
        results, reason = {}, str(exc)
    for nodeid in nodeids:
        got = results.get(nodeid)
        entry = collector.tests[nodeid]
        if isinstance(got, dict) and got.get("status") in ("passed", "failed", "error"):
            entry.update(status=got["status"], output=(str(got.get("output") or "") + "\n\n" + LOCAL_NOTE).strip())
        else:
            entry.update(status="error", output=reason or "the check did not run in the sandbox")
            box.incidents.setdefault(nodeid, reason or "the check did not run in the sandbox")


def run_scenarios(path: str, box: Box) -> list:
    """The instructor's own scenarios (not shipped to students), each explored like a level test."""
    from grader.engine.explore import explore_loop
    spec = load_scenarios(path)
    out = []
    submission = RemoteSubmission(Path(box.folder))
    for scenario, points, invariants in spec["scenarios"]:
        nodeid = f"instructor::{scenario.name}"
        box.current = nodeid
        entry = {"nodeid": nodeid, "name": f"instructor scenario: {scenario.name}", "max_score": float(points),
                 "task": None, "status": "failed", "output": ""}
        try:
            module = submission.load(spec["file"])
            fn = getattr(module, spec["function"], None)
            if not callable(fn):
                raise Incident(box.incident(f"{spec['file']} has no function `{spec['function']}`"))
            found = explore_loop(fn, scenario, models=spec["models"], timeout=min(20.0, max(box.time_left(), 0.1)))
            bad = found.error or found.unseen or [v for v in found.violations
                                                   if not invariants or v.invariant in invariants]
            entry.update(status="failed" if bad else "passed", output=found.report() if bad else "")
        except BaseException as exc:  # noqa: BLE001 - pytest.fail raises an outcome, not an Exception
            entry.update(status="failed", output=str(exc) or type(exc).__name__)
        out.append(entry)
    return out


def load_scenarios(path: str) -> dict:
    """Read an instructor's scenario file (JSON, or Python defining SCENARIOS). Kept out of the student kit.

    JSON::

        {"file": "agent.py", "function": "run_agent", "models": ["M1", "M2"], "points": 1,
         "scenarios": [{"name": "refund audit", "task": "Total the refunds", "points": 2,
                        "invariants": ["PARSE", "WHOLE"],
                        "turns": [["read_report", {"week": 1}, "refunds: 40 EUR"], ...]}]}

    Python: a module with ``SCENARIOS`` (a list of :class:`grader.engine.scripted.Scenario` or of dicts as
    above) and optionally ``FILE``, ``FUNCTION``, ``MODELS``, ``POINTS``. Each scenario becomes one
    more check worth ``points``: the function runs once in the sandbox, and every crash state under
    ``models`` must keep ``invariants`` (all of them when the list is empty or absent).
    """
    from grader.engine.scripted import Scenario, from_turns
    p = Path(path)
    if p.suffix == ".py":
        import importlib.util
        spec_ = importlib.util.spec_from_file_location("crashcourse_instructor_scenarios", p)
        mod = importlib.util.module_from_spec(spec_)
        spec_.loader.exec_module(mod)
        data = {k.lower(): getattr(mod, k) for k in ("FILE", "FUNCTION", "MODELS", "POINTS", "SCENARIOS")
                if hasattr(mod, k)}
    else:
        data = json.loads(p.read_text(encoding="utf-8"))
    items = []
    for i, item in enumerate(data.get("scenarios", [])):
        if isinstance(item, Scenario):
            items.append((item, data.get("points", 1), []))
            continue
        turns = [tuple(t) for t in item.get("turns", [])]
        scenario = from_turns(item.get("task", "the instructor's task"), turns, item.get("final_text", "Done."),
                              seed=int(item.get("seed", 0)), name=item.get("name", f"scenario {i + 1}"))
        items.append((scenario, item.get("points", data.get("points", 1)), list(item.get("invariants", []))))
    return {"file": data.get("file", "agent.py"), "function": data.get("function", "run_agent"),
            "models": tuple(data.get("models", ("M1", "M2"))), "scenarios": items}
