"""What a level's tests hold in place of the student's module when ``crashcourse grade`` judges it.

The judge (:mod:`grader.grading.judge`) runs the level's real tests; their ``submission`` fixture
hands out a :class:`RemoteSubmission`, whose ``load`` returns a :class:`RemoteModule`: its
functions (:class:`RemoteFunction`) run in the sandboxed worker, and what they record, return,
raise and change comes back as data. The judge's own objects (the scripted model, the tools)
cross as handles (:func:`prepare`), so each model and tool call is served, and recorded, here.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import itertools
import json
import os
import pickle
import shutil
import stat
import sys
import types
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from grader.engine import hangs, loader
from grader.engine import recorder as recorder_module
from grader.engine.crash_models import ReplayTooLarge
from grader.engine.explore import REMOTE_FRAMES
from grader.engine.hangs import LoopTimeout
from grader.engine.recorder import Op
from grader.grading import faults, kernel_trace, wire
from grader.grading.bubblewrap import read_box_file
from grader.grading.box import Box, Incident, Worker, listing, sweep
from grader.grading.wire import Callback, Stand

# The variables pytest sets in its own process while a test runs: the judge's are handed to the code.
PYTEST_VARIABLES = ("PYTEST_CURRENT_TEST", "PYTEST_VERSION")
SAFE_MODULES = {"datetime", "decimal", "fractions", "pathlib", "uuid", "collections"}


_PRISTINE: dict = {}
_ATTEMPT_GENERATIONS = itertools.count(-1, -1)  # never a normal worker's generation (those count up from 1)
PATCHED = ("this check changes {names} in the grading process, which cannot reach your code: it runs in a "
           "box of its own. The check cannot be made this way under crashcourse grade, so it earns nothing; "
           "tell your instructor (a check that needs a fault asks for one with run_with_fault)")


def remember_pristine() -> None:
    """Note the os module and open() as they are before any test runs, to spot a test that patches them."""
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
    allowed = recorder_module.wrapper_ids()
    now = vars(os)
    out = [f"os.{k}" for k, v in _PRISTINE["os"].items()
           if now.get(k, _PRISTINE) is not v and id(now.get(k)) not in allowed and not k.startswith("_")
           and k != "environ" and not getattr(now.get(k), "_crashcourse_forward", None)
           # The kit's own guard while code "runs" in a folder (the worker keeps one of its own):
           # grader.engine.recorder.temp_folder_apart.
           and not getattr(now.get(k), "crashcourse_guard", False)]
    if builtins.open is not _PRISTINE["open"][0] and id(builtins.open) not in allowed:
        out.append("open")
    return out


class RemoteSubmission:
    """Drop-in for :class:`grader.faces.plugin.Submission`: the same methods, the code runs in the worker."""

    def __init__(self, folder: Path, box: Box):
        self.folder = Path(folder)
        self.box = box
        self._baselines: dict = {}  # a fault check's run without the fault, by the key its steps share
        self._world: Optional[tuple] = None  # while a fault check runs: the box's files before it, and what to skip

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
            pytest.fail(box.incident(PATCHED.format(names=", ".join(patched[:3]))), pytrace=False)
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

    def run_with_fault(self, fault: dict, steps: Callable[[Callable[[], None]], Any], workdir: Any) -> faults.FaultRun:
        """Run a check's ``steps(arm)`` in a fresh worker whose tracer makes the kernel fail the calls
        ``fault`` names (``{"fails": "fsync of a file", "once": True}``, see :mod:`grader.grading.faults`)
        once the steps call ``arm()``; ``fault["platform"]`` (``"windows"``) makes the code see that
        platform from then on. ``workdir``: the folder the steps save in, emptied before each run.
        ``fault["baseline"]``: a key for steps that other calls run too (in other folders): their run
        without the fault is made once.

        The steps run first with no fault, to find in the kernel's trace which calls the fault is
        for, then with it, and again if the fault missed a call or hit one it was not meant for.
        Returns the last run: what the steps returned, and what the kernel and the disk say.
        """
        box = self.box
        wanted_fault = faults.Fault.from_dict(fault)
        if box.kernel_problem is not None:
            return self._run_patched(fault, steps, workdir)
        # Every run of the steps starts from the same files: what a run made anywhere in the box's
        # folder, outside the check's own (emptied) and those every worker gets afresh, is removed
        # before the next, so no note left by the run without the fault says which run has it.
        skip = (os.path.join(box.root, "home"), box.folder, os.fspath(workdir))
        self._world = (listing(box.root, skip), skip)
        try:
            return self._run_with_fault(fault, steps, workdir, wanted_fault)
        finally:
            self._world = None

    def _run_with_fault(self, fault: dict, steps: Callable, workdir: Any, wanted_fault: faults.Fault) -> faults.FaultRun:
        inject: list = []
        key = fault.get("baseline")  # steps that are the same as another check's: one run without the fault
        cached = self._baselines.get(key) if key is not None else None
        for _ in range(faults.ATTEMPTS):
            if cached is not None and not inject:
                value, calls, main, armed_at, dirs = cached
            else:
                _empty(Path(workdir))
                value, calls, main, armed_at = self._attempt(inject, fault.get("platform"), steps)
                dirs = {c.path for c in calls if c.path and faults.is_directory(c.path)}
                if key is not None and not inject:
                    self._baselines[key] = (value, calls, main, armed_at, dirs)
            considered = calls
            after = faults.after_arming(considered, faults.worker_threads(calls, main), armed_at)
            want = faults.wanted(after, wanted_fault, dirs.__contains__)
            exact = want == faults.hit(considered)  # nothing else hit, in any thread, before or after arming
            better = None if exact else faults.plan(considered, want, wanted_fault, first=not inject)
            if cached is not None and not inject and (exact or better is None):
                cached = None  # this run is the answer: make it here after all, so its files are in this folder
                continue
            if exact or better is None or better == inject:
                break
            inject = better
        if not exact:
            # Counting calls (strace's when=N) cannot single these out: the check is made another way
            # that can be, rather than cost correct code its point (see faults.FALLBACK).
            return self._run_patched(fault, steps, workdir, checked=wanted_fault)
        return faults.FaultRun(value=value, read=self._reader(workdir), whole_syncs=faults.whole_syncs(after),
                               failed=[faults.describe(c, dirs.__contains__) for c in after if c.injected])

    @contextlib.contextmanager
    def _fresh_worker(self, inject: Optional[tuple]) -> Iterator[Worker]:
        """A new worker for one run of a check's steps (``inject``: see :class:`Worker`), stopped after."""
        box = self.box
        if box.expired:
            raise Incident(box.incident(box.expired))
        if box.worker is not None:
            # Stopping a worker ends every process of the box: the idle one would not outlive this run.
            box.worker.stop()
            box.worker = None
        saved = box.generation
        if self._world is not None:
            before, skip = self._world
            try:
                changed = sweep(box.root, before, skip)
            except OSError as exc:
                raise Incident(box.incident(f"the grader could not clear what your code's last run left before "
                                            f"running the check's steps again ({exc})")) from exc
            if changed:
                raise Incident(box.incident(
                    f"your code changed {changed[0]}, a file it did not make and outside the folders it was given, "
                    "while the grader ran this check's steps. The check runs them more than once and each run must "
                    "start from the same files, so the check could not be made"))
        with hangs.paused():  # the box's start is the grader's time (Box.ensure_worker)
            worker = Worker(box, inject=inject)
        box.worker, box.generation = worker, next(_ATTEMPT_GENERATIONS)
        try:
            yield worker
        finally:
            worker.stop()
            if box.worker is not None and box.worker is not worker:
                box.worker.stop()  # started during the steps after the fault worker died
            # The next call starts a fresh worker, and modules loaded before import again there.
            box.worker, box.generation = None, saved

    def _attempt(self, inject: list, platform: Optional[str], steps: Callable) -> tuple:
        """One run of ``steps`` in a new worker injecting ``inject``: ``(value, calls, main thread, armed at)``."""
        box = self.box
        with self._fresh_worker(tuple(inject)) as worker:
            armed = {"at": 0}

            def arm() -> None:
                if platform is not None:
                    worker.send({"op": "platform", "name": platform}, "changing the platform")
                    worker.read_message("changing the platform")
                armed["at"] = worker.consumed
            value = steps(arm)
            kernel = _whole_trace(box, worker)
            return value, list(kernel.calls or ()), kernel.main_tid, armed["at"]

    def _run_patched(self, fault: dict, steps: Callable, workdir: Any,
                     checked: Optional[faults.Fault] = None) -> faults.FaultRun:
        """The steps with ``os`` patched in the worker (as in a learner's own run), which reports the calls
        that failed: where strace cannot run, or (``checked``) where it runs but counting calls cannot fail
        exactly the ones the fault is for. Then the worker is still traced, and a call the fault is for
        that reached the kernel after the fault was armed and succeeded went around the patch: a fault
        every such call should meet makes the check fail, saying so. Said in the check's report either way.
        """
        if checked is None:
            note = (f"(No strace here ({self.box.kernel_problem}), so this check's fault was made by patching os in the "
                    "box, as in your own pytest run, and code there could have undone it.)")
        else:
            note = faults.FALLBACK.format(fails=checked.fails)
        _empty(Path(workdir))
        plain = {k: fault[k] for k in ("fails", "once", "platform") if k in fault}
        armed = {"at": 0}
        with self._fresh_worker(None if checked is None else ()) as worker:
            def arm() -> None:
                worker.send({"op": "misbehave", "fault": plain}, "changing the platform")
                worker.read_message("changing the platform")
                armed["at"] = worker.consumed
            value = steps(arm)
            worker.send({"op": "misbehaved"}, "reading what failed")
            reply = worker.read_message("reading what failed")
            slipped: list = []
            if checked is not None:
                kernel = _whole_trace(self.box, worker)
                calls = list(kernel.calls or ())
                dirs = {c.path for c in calls if c.path and faults.is_directory(c.path)}
                after = faults.after_arming(calls, faults.worker_threads(calls, kernel.main_tid), armed["at"])
                slipped = faults.slipped(after, checked, dirs.__contains__)
        if slipped:
            return faults.FaultRun(value=value, read=self._reader(workdir), exact=False, note=faults.WENT_AROUND.format(
                fails=checked.fails, call=slipped[0]))
        failed = reply.get("failed") if type(reply.get("failed")) is int else 0
        return faults.FaultRun(value=value, read=self._reader(workdir), whole_syncs=reply.get("whole_syncs") is True,
                               note=note,
                               failed=["a patched call"] * max(0, min(failed, 1000)))

    def _reader(self, workdir: Any) -> Callable[[str], Optional[bytes]]:
        root = self.box.root

        def read(relative: str) -> Optional[bytes]:
            path = os.path.relpath(os.path.join(os.path.realpath(workdir), relative), root)
            return read_box_file(root, path)[0]  # through O_NOFOLLOW, a regular file only
        return read


def _whole_trace(box: Box, worker: Worker) -> kernel_trace.KernelTrace:
    """The worker's kernel trace, read up to its last message: what a fault check is judged on. A run
    the trace refused (too many operations), or a trace that stopped short or was tampered with, ends
    the check."""
    kernel = worker.kernel
    whole = kernel is not None and kernel.catch_up(worker.consumed)
    if kernel is not None and kernel.refused and (whole or kernel.flooded):
        raise Incident(box.incident(kernel.refused))
    if not whole or kernel.tampered or kernel.main_tid is None:
        tampered = f" ({kernel.tampered})" if kernel is not None and kernel.tampered else ""
        raise Incident(box.incident("the kernel's trace of your code stopped before the check ended, so the fault "
                                    f"could not be checked{tampered}"))
    return kernel


def _working_folder() -> Optional[str]:
    """The folder the call runs in: the judge's own, or None where it was removed (a check's temp folder
    already gone); the worker then runs the call in the submission's folder (worker.call)."""
    try:
        return os.getcwd()
    except OSError:
        return None


def _keep(rec: Any, op: Op) -> Op:
    """Store one of the kernel's operations in the judge's recorder (the crash states' source). The trace
    joined its writes already (grader.engine.ops.join_write), within one message of the worker."""
    return rec.add(op.kind, api=op.api, path=op.path, dest=op.dest, handle=op.handle, offset=op.offset, data=op.data,
                   size=op.size, flags=op.flags, is_dir=op.is_dir, cuts=op.cuts)


def _empty(folder: Path) -> None:
    """Remove what an earlier run of a check left in ``folder`` (never following a link)."""
    folder.mkdir(parents=True, exist_ok=True)
    for entry in os.listdir(folder):
        path = folder / entry
        if stat.S_ISDIR(os.lstat(path).st_mode):
            shutil.rmtree(path)
        else:
            os.unlink(path)


class RemoteModule(types.ModuleType):
    """A student's module as the judge sees it: functions that call into the worker, mirrored errors."""

    @classmethod
    def load(cls, box: Box, filename: str) -> "RemoteModule":
        if filename in box.load_failures:
            # Said in full once (the first test, and the submission's error); later tests name it.
            first_line = box.load_failures[filename].split("\n", 1)[0].rstrip(":. ")
            raise Incident(f"Not run: {first_line}. The first test's output shows why, as Python reports it.")
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
        payload = prepare(value, objects)
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
        limit = told = hangs.loop_timeout()  # as the plugin gives an import in-process
        left = hangs.remaining()
        if 0 < left and max(left * 0.9 - 0.2, left / 2) < limit:
            # Inside a limit running here (the loop's, say) that ends sooner: the worker stops the import a
            # little before this process would, and says where it was, as for a call (converse).
            limit, told = max(left * 0.9 - 0.2, left / 2), hangs.limit_told()
        worker.send({"op": "load", "filename": self._filename, "limit": limit, "told": told,
                     "pytest": [os.environ.get(name) for name in PYTEST_VARIABLES]}, what)
        reply = worker.read_message(what)
        if reply.get("op") != "loaded":
            error = reply.get("error") if isinstance(reply.get("error"), dict) else {}
            hang = _hang_from(reply.get("hang"))
            if hang is not None:
                worker.stop()  # stopped mid-import: its state is unknown
            reason = hang[0].story if hang is not None else loader.import_problem(self._filename, error)
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
        where = loader.last_frame(error.get("where"))
        exc = _rebuilt(cls, error.get("args"), message, where) if name != "MemoryError" else None
        if exc is None:
            exc = cls(message + (f" [{where}]" if where else ""))
        if isinstance(error.get("where"), str):
            setattr(exc, REMOTE_FRAMES, error["where"])  # the learner's frames, not this module's
        return exc


def _racing(fn: Any, differs: str) -> str:
    """The kernel saw the file operations in another order than the recorder, and another thread of
    the learner's code was still running at this call: say that race, not only the disagreement."""
    name = getattr(fn, "__name__", "") or "the model or a tool"
    return (f"another thread of your code was still writing files when it called {name} (a save, perhaps save "
            "point A, started in a thread that was not joined first): the call and those writes happened at the "
            "same time, so no single order of them is what happened, and a crash during the call may find the "
            f"save not yet on disk. Wait for the save to finish before the call ({differs})")


def _rebuilt(cls: type, args: Any, message: str, where: str) -> Optional[BaseException]:
    """The exception built again as the learner's code built it: from its own arguments, which is the
    only way some built-in ones can be (UnicodeDecodeError takes five); a type whose constructor
    will not take them back gets its message and its place as one text."""
    if isinstance(args, list):
        try:
            exc = cls(*args)
            if str(exc) == message:
                return exc
        except Exception:  # noqa: BLE001 - a learner's class may want other arguments
            pass
    try:
        cls(message)
    except Exception:  # noqa: BLE001 - the constructor takes no single text either: keep the type anyway
        text = message + (f" [{where}]" if where else "")
        exc = cls.__new__(cls)
        exc.args = (text,)
        if str(exc) != text:  # a __str__ that reads fields only its constructor sets
            told = type(cls.__name__, (cls,), {"__module__": cls.__module__, "__str__": lambda self: self.args[0]})
            exc = told.__new__(told)
            exc.args = (text,)
        return exc
    return None


_INTERNAL = {"_box", "_filename", "_names", "_ident", "_module_name", "_generation", "_exceptions", "_overrides"}


class RemoteClass:
    def __init__(self, filename: str, name: str):
        self.filename, self.name = filename, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"the grader cannot build a {self.name} from {self.filename} across the sandbox; "
                        "the level's tests call functions only")


class RemoteFunction:
    """One of the student's functions. Calling it runs it in the worker and returns what it returned."""

    fresh = False  # each call run by the worker in a process that never ran the submission's code

    def __init__(self, module: RemoteModule, name: str):
        self.module, self.__name__ = module, name
        self.__qualname__ = name

    def in_a_fresh_process(self) -> "RemoteFunction":
        """This function, each call of it made afresh: the worker imports the file again in a child of a
        process that never ran any of it (grader.engine.fresh), so nothing in memory carries over."""
        twin = RemoteFunction(self.module, self.__name__)
        twin.fresh = True
        return twin

    def __repr__(self) -> str:
        return f"<function {self.__name__} from {self.module._filename}, run in the sandbox>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        box = self.module._box
        if box.expired:
            raise Incident(box.incident(box.expired))
        patched = patched_by_test()
        if patched:
            raise Incident(box.incident(PATCHED.format(names=", ".join(patched[:3]))))
        call = _Call(self, args, kwargs)
        stuck = box.stuck.get(self.__name__)
        if stuck is not None:  # it got stuck in the sandbox earlier in this run: it would only again
            raise hangs.refused_elsewhere(stuck)
        message = call.converse()
        call.take_account(message)
        call.give_back(message)
        return call.outcome(message)

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
        if isinstance(message.get("json"), bytes):  # plain JSON data (see grader.grading.wire.plain_json)
            if wire.decoded_cost(message["json"]) > wire.MAX_DECODED:  # weighed before it is decoded, as a reply is
                raise Incident(self.module._box.incident(
                    f"a broken run: your code called {getattr(fn, '__name__', 'the model or a tool')} with arguments "
                    f"that would cost the grader more than {wire.MAX_DECODED // 2**20} MiB to read"))
            try:
                args, kwargs = json.loads(message["json"])
                kwargs = with_kept_messages(kwargs, worker.sent_messages.get(ident), message.get("keep"))
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
        except (Incident, LoopTimeout):
            raise
        except Exception as exc:  # noqa: BLE001 - the model or a tool refusing: the student's loop sees it
            worker.send({"op": "error", "type": type(exc).__name__, "mro": [c.__name__ for c in type(exc).__mro__],
                         "message": str(exc)}, what)
            return
        worker.send({"op": "value", "value": prepare(value, objects)}, what)


class _Call:
    """One call of a student's function in the worker, from the request to what it returned or raised."""

    def __init__(self, function: RemoteFunction, args: tuple, kwargs: dict):
        self.function, self.box = function, function.module._box
        self.worker = function.module._worker()
        self.args, self.kwargs = args, kwargs
        self.objects: dict = {}  # handle -> a callable or live object handed to the worker
        self.payload_args = prepare(list(args), self.objects)
        self.payload_kwargs = prepare(kwargs, self.objects)
        self.rec = recorder_module.active()
        self.box.calls += 1
        self.what = f"running {function.__name__}"

    def converse(self) -> dict:
        """Send the call, then serve the model and tool calls it makes until it returns or raises (that
        last message is returned); every message's file operations go to the recorder on the way."""
        worker, rec = self.worker, self.rec
        request = {"op": "call", "module": self.function.module._ident, "name": self.function.__name__,
                   "args": self.payload_args, "kwargs": self.payload_kwargs, "cwd": _working_folder(),
                   "watch": list(rec.watch) if rec is not None else None,
                   "forward": forwarded_patches(), "fresh": self.function.fresh,
                   # What a learner's own pytest shows the code while it runs (grader.grading.worker.as_in_pytest).
                   "pytest": [os.environ.get(name) for name in PYTEST_VARIABLES]}
        left = hangs.remaining()
        if left > 0:
            # The worker stops the code a little before this process would, and says where it was.
            request["limit"], request["told"] = max(left * 0.9 - 0.2, left / 2), hangs.limit_told()
        self.handle_base = 1_000_000 * self.box.calls
        worker.sent_messages = {}  # the worker forgets them too when a call starts
        self.started_at = worker.consumed  # where this call's replies begin on the pipe (the kernel trace's clock)
        if worker.kernel is not None and rec is not None:
            worker.kernel.seed(rec.watch)  # what the folders hold now: the bytes of the code's copies of them
            # The trace joins writes itself, within one message; what it hands over is labelled after it is
            # stored (KernelTrace.settle), so the recorder must keep each operation it is given as it is.
            rec.join_writes = False
        try:
            worker.send(request, self.what)
            while True:
                message = worker.read_message(self.what, objects=self.objects)
                hangs.heard_from_the_box()
                op = message.get("op")
                if op == "callback":
                    # The code waits for this answer with its clock stopped (worker.Session._callback):
                    # this process's clock stops too while it reads the trace so far and answers.
                    with hangs.paused(charge=hangs.CALL_CHARGE):
                        self._record(message)
                        self.function._serve_callback(worker, message, self.objects, self.what)
                    continue
                if op in ("ops", "return", "raise"):
                    self._record(message)
                if op in ("return", "raise"):
                    return message
        except BaseException:
            # A timeout signal or an incident mid-call: the worker's state is unknown, so it goes.
            if worker.alive:
                worker.stop()
            raise

    def _record(self, message: dict) -> None:
        self._settle(message)
        rec, kernel = self.rec, self.worker.kernel
        # Counted as the judge keeps them (the kernel's account, or the recorder's without one): past
        # the cap the run is broken, and nothing more is kept.
        too_many = kernel.refused if kernel is not None else None
        if too_many is None and rec is not None and len(rec.ops) > kernel_trace.MAX_OPS:
            too_many = kernel_trace.TOO_MANY
        if too_many:
            raise Incident(self.box.incident(too_many))

    def _settle(self, message: dict) -> None:
        rec, worker = self.rec, self.worker
        if rec is None or worker.kernel is None:
            self.function._take_ops(rec, message.get("ops"), self.objects, self.handle_base)
            return
        # What happened on disk is what the kernel saw (grader.grading.kernel_trace): its
        # operations are kept, in its order; the worker's recorded ones only label them.
        refused = worker.kernel.settle(message.get("ops") or (), worker.consumed, rec.watch,
                                       since=self.started_at, keep=functools.partial(_keep, rec))
        if refused and message.get("op") == "callback" and message.get("threads"):
            refused = _racing(self.objects.get(message.get("id")), refused)
        if refused and refused not in rec.unseen:
            rec.unseen.append(refused)

    def take_account(self, message: dict) -> None:
        """What the worker says about the call besides its value: output it dropped, what its recorder
        missed (checked against the disk), the files the code read."""
        worker, box, rec = self.worker, self.box, self.rec
        dropped = message.get("dropped_output")
        if isinstance(dropped, int) and not isinstance(dropped, bool) and dropped > worker.dropped_output:
            # What the worker printed past what the judge keeps, counted there (grader.grading.worker._Capped).
            box.output_dropped += dropped - worker.dropped_output
            worker.dropped_output = dropped
        if rec is not None:
            # What the worker's recorder says it missed is the kernel's to tell, where there is a kernel trace:
            # a call it did not see is still in the kernel's account, and is judged on its effect.
            unseen = message.get("unseen") if worker.kernel is None else None
            if isinstance(unseen, list):
                rec.unseen.extend(str(u)[:500] for u in unseen[:50])
            refused = _refused_link(message) if worker.kernel is not None else None
            if worker.kernel is not None and refused is None:
                # Bytes copied inside the kernel that no word of shutil's gave: the crash states cannot hold them.
                refused = kernel_trace.unknown_bytes(rec.ops, rec.watch)
            if refused is not None and refused not in rec.unseen:
                rec.unseen.append(refused)
            try:
                rec.compare_with_disk()
            except ReplayTooLarge as exc:  # sizes the kernel saw, past what the judge will hold for a box
                worker.stop()
                raise Incident(box.incident(str(exc))) from None
        reads = message.get("reads")
        if isinstance(reads, list):
            # Replay the files the code opened for reading, so audit hooks here (a check that
            # watches which files a loader read) see what they would have seen in-process.
            for item in reads[:5000]:
                if isinstance(item, list) and len(item) == 3 and isinstance(item[0], str):
                    sys.audit("open", item[0], item[1] if isinstance(item[1], str) else None,
                              item[2] if isinstance(item[2], int) else None)

    def give_back(self, message: dict) -> None:
        """Merge what the code changed in its arguments back into the caller's objects."""
        new_args, new_kwargs = message.get("args"), message.get("kwargs")
        if isinstance(new_args, list) and len(new_args) == len(self.args):
            for old, new in zip(self.args, new_args):
                merge(old, new)
        if isinstance(new_kwargs, dict):
            for key, old in self.kwargs.items():
                if key in new_kwargs:
                    merge(old, new_kwargs[key])

    def outcome(self, message: dict) -> Any:
        """The value the call returned, or what it raised (a hang the worker stopped is a LoopTimeout)."""
        if message.get("op") != "raise":
            return message.get("value")
        hang = _hang_from(message.get("hang"))
        if hang is not None:
            for name in hang[1]:
                self.box.stuck.setdefault(name, hang[0])
            self.worker.stop()  # it was stopped mid-call: its state is unknown
            raise hangs.LoopTimeout(hang[0].story, hang[0].place, hang[0])
        error = message.get("error") if isinstance(message.get("error"), dict) else {}
        raise self.function.module._exception(error)


def _refused_link(message: dict) -> Optional[str]:
    """The symbolic link a call stopped on, in the words of the learner's own pytest, or None.

    The box refuses links (its seccomp filter answers EPERM before the tracer is asked, so the kernel
    trace never shows the call). When a call raises PermissionError and the worker's recorder saw the
    code make a link (the audit event os.symlink), the refusal is why the run stopped: told as the link
    the crash models do not follow, with why it stopped here. Only words: the run stopped either way,
    and a line the worker adds can only give a run another reason to fail."""
    error, unseen = message.get("error"), message.get("unseen")
    if message.get("op") != "raise" or not isinstance(error, dict) or error.get("type") != "PermissionError" \
            or not isinstance(unseen, list):
        return None
    links = [u for u in unseen[:50] if isinstance(u, str) and u.startswith("os.symlink(") and len(u) <= 500]
    return f"{links[-1]} ({recorder_module.BOX_REFUSED_LINK})" if links else None


def _hang_from(data: Any) -> Optional[tuple]:
    """``(Hang, names of the learner's functions on the stuck stack)`` from the worker's account of a
    hang, checked field by field (it comes from beside the learner's code), or None."""
    if not isinstance(data, dict):
        return None
    text = {key: data.get(key) for key in ("function", "place", "story", "spot")}
    seconds, stuck = data.get("seconds"), data.get("stuck")
    if not all(isinstance(v, str) for v in text.values()) or not isinstance(seconds, (int, float)) \
            or not isinstance(stuck, list) or not all(isinstance(n, str) for n in stuck):
        return None
    short = {key: value[:4000] for key, value in text.items()}
    hang = hangs.met_elsewhere(short["function"][:200], short["place"][:500], short["story"], float(seconds),
                               short["spot"][:200])
    return hang, [n[:200] for n in stuck[:50]] + [short["function"][:200]]


def with_kept_messages(kwargs: Any, before: Optional[list], keep: Any) -> Any:
    """``kwargs`` with its ``messages`` put back together: the first ``keep`` from the last call, then
    the ones sent now (see ``Session.unchanged_messages`` in :mod:`grader.grading.worker`)."""
    if keep in (None, 0):
        return kwargs
    if type(keep) is not int or keep < 0 or before is None or keep > len(before) or not isinstance(kwargs, dict) \
            or not isinstance(kwargs.get("messages"), list):
        raise ValueError("the call refers to messages the grader was not sent")
    return dict(kwargs, messages=before[:keep] + kwargs["messages"])


def prepare(value: Any, objects: dict, depth: int = 0) -> Any:
    """What goes to the worker: plain data as it is; callables and live objects as handles."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if depth > 200:
        return None
    if isinstance(value, list):
        return [prepare(v, objects, depth + 1) for v in value]
    if isinstance(value, tuple) and type(value) is tuple:
        return tuple(prepare(v, objects, depth + 1) for v in value)
    if isinstance(value, dict) and type(value) is dict:
        return {prepare(k, objects, depth + 1): prepare(v, objects, depth + 1) for k, v in value.items()}
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


def merge(old: Any, new: Any) -> None:
    """Bring an argument the function changed back into the caller's object, keeping what did not change."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [k for k in old if k not in new]:
            del old[key]
        for key, value in new.items():
            if key in old and (old[key] is value or _same(old[key], value)):
                continue
            if key in old and isinstance(old[key], (dict, list)) and type(old[key]) is type(value):
                merge(old[key], value)
            else:
                old[key] = value
    elif isinstance(old, list) and isinstance(new, list):
        if len(old) == len(new):
            for i, value in enumerate(new):
                if old[i] is value or _same(old[i], value):
                    continue
                if isinstance(old[i], (dict, list)) and type(old[i]) is type(value):
                    merge(old[i], value)
                else:
                    old[i] = value
        else:
            old[:] = new
