"""The sandboxed side of ``crashcourse grade``: the only process that ever imports a student's code.

``python -m grader.grading.worker --read FD --write FD`` is started by the judge (:mod:`grader.grading.judge`)
inside the sandbox that :mod:`grader.grading.sandbox` builds. It serves a small request loop:

``load``      import one file of the submission as a fresh module and describe its names
``call``      call one of those functions, optionally under a :class:`~grader.engine.recorder.Recorder`
``platform``  before a check's fault: look like another platform from now on (see
              :mod:`grader.grading.faults`); nothing else tells a fault run from another run
``misbehave``, ``misbehaved``  where no tracer can make a check's fault (or counting calls cannot make
              it exactly): patch ``os`` to make it, and say which calls failed

It decides nothing. It reports, as plain data, what happened: the value a function returned or the
exception it raised, the file operations the recorder saw, and its requests to call back into the
judge (the scripted model and tools live there, so the judge, not this process, knows which model
and tool calls really happened). Every verdict is computed by the judge from that data.

The wire format, both directions, is in :mod:`grader.grading.wire`: the judge never unpickles
anything a student's code could have written.
"""

from __future__ import annotations

import builtins
import itertools
import os
import pickle
import sys
import threading
import types
from typing import Any, Optional

from grader.engine import fresh, hangs, loader
from grader.engine.forwarded import FORWARDED, PLATFORMS, MisbehavingOs
from grader.engine.ops import Op
from grader.engine import recorder as _recorder_module
from grader.engine.recorder import Recorder
from grader.engine.turnstile import Turnstile
from grader.grading.wire import (COPIES, ELIDED, FORK_SERVER_KILLED, Blob, Callback, Stand, encode, frame, plain_json,
                                 read_request)

_write_fd = -1
_read_fd = -1
_counter = itertools.count()


def _seconds(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def _with_hang(outcome: dict, exc: BaseException) -> dict:
    """``outcome`` with the story of a hang stopped here, told from the learner's frames, if it was one."""
    hang = getattr(exc, "hang", None) if isinstance(exc, hangs.LoopTimeout) else None
    if hang is not None:
        outcome["hang"] = {"function": hang.function, "place": hang.place, "story": hang.story,
                           "seconds": hang.seconds, "spot": hang.spot, "stuck": sorted({code[2] for code in hang.codes})}
    return outcome


def describe_exception(exc: BaseException, filename: str = "") -> dict:
    """An exception as data the judge can read (see :func:`grader.engine.loader.describe_exception`)."""
    return loader.describe_exception(exc, filename, encode=encode)


# -- the pipe ---------------------------------------------------------------------------------------

def _write_all(data: bytes) -> None:
    real_write = _recorder_module.real_os("write")  # never the recorder's own wrapper: this is not the student's
    view = memoryview(data)
    while view:
        n = real_write(_write_fd, view)
        view = view[n:]


def _pickled(messages: list) -> list:
    """Each message as pickle bytes: what :meth:`Session.unchanged_messages` compares against."""
    try:
        return [pickle.dumps(m, protocol=pickle.HIGHEST_PROTOCOL) for m in messages]
    except Exception:  # noqa: BLE001 - never compared equal again, so sent in full next time
        return []


def send(message: dict) -> None:
    _write_all(frame(message))


def _read_exact(n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(_read_fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("the judge closed the pipe")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def receive() -> Any:
    return read_request(_read_exact)


# -- what the code read ----------------------------------------------------------------------------

_reads: Optional[list] = None


def _note_read(event: str, args: tuple) -> None:
    # Files opened for reading during a call are reported, so the judge's own audit hooks (some
    # checks watch which files a loader opened) see them as if the code had run in the judge.
    if event == "open" and _reads is not None and len(_reads) < 5000:
        path, mode, flags = (tuple(args) + (None, None, None))[:3]
        if isinstance(path, str) and not path.endswith((".py", ".pyc")):
            writes = (isinstance(mode, str) and bool(set(mode) & set("wxa+"))) or (
                mode is None and isinstance(flags, int) and bool(flags & (os.O_WRONLY | os.O_RDWR)))
            if not writes:
                _reads.append([path, mode if isinstance(mode, str) else None, flags if isinstance(flags, int)
                               else None])


# -- words for the kernel's operations -------------------------------------------------------------
#
# Under a kernel trace (crashcourse grade) the worker replaces nothing the code could compare: os, io,
# builtins and the learner's own names are the real ones, so code that behaves well only while it is
# watched (`os.replace is not posix.replace`) behaves here as it does unwatched. The kernel's account
# says what happened; the few words a learner reads in a story (os.replace or os.rename, whether a
# file was there before its open, the bytes shutil copied inside the kernel) come from audit events
# (PEP 578), which replace no function. An event is raised before its call is made, so each word waits
# until the call is seen to have taken effect (the thread's next event, or its next message to the
# judge), and is dropped when it did not: a word for a call that failed would be refused by the judge
# as an operation the kernel never saw.

_WRITING_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_COPY_CAP = 16 << 20  # bytes of one shutil copy read to name its bytes (the box caps a file lower)
_words_local = threading.local()
_pending: list = []  # [thread ident, recorder, Op, check() -> True (took effect), False (did not), None (not yet)]


def _full(path: Any, dir_fd: Any = None) -> Optional[str]:
    """An audit event's path made absolute as the kernel resolves it (None when it cannot be said)."""
    if isinstance(path, int) or path is None:
        return None
    try:
        path = os.fsdecode(os.fspath(path))
        head, _, number = path.rpartition("/")
        if number.isdigit() and head in ("/dev/fd", "/proc/self/fd", f"/proc/{os.getpid()}/fd"):
            path = os.readlink(f"/proc/self/fd/{number}")  # the open file it names (an open of it opens that)
        if isinstance(dir_fd, int) and dir_fd >= 0 and not os.path.isabs(path):  # -1: no dir_fd given
            path = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path)
        return os.path.abspath(path)
    except (TypeError, ValueError, OSError):
        return None


_LOADS = frozenset({"LOAD_ATTR", "LOAD_METHOD", "LOAD_GLOBAL", "LOAD_NAME"})
_instructions: dict = {}  # code object -> its instructions (kept alive with it, so its id is never reused)


def _named(frame: Any, names: tuple, default: str) -> str:
    """Which of ``names`` (os functions one audit event stands for) the calling Python code called, as
    ``os.NAME``: the last of them it loaded before the call it is making (only words: ``default`` when
    it cannot be told, say under another name)."""
    try:
        code = frame.f_code
        if not any(n in code.co_names for n in names):
            return default
        if code not in _instructions:
            import dis
            _instructions[code] = [(i.offset, i.opname, i.argval) for i in dis.get_instructions(code)]
        for offset, opname, argval in reversed(_instructions[code]):
            if offset <= frame.f_lasti and opname in _LOADS and argval in names:
                return f"os.{argval}"
    except Exception:  # noqa: BLE001 - only words
        pass
    return default


def _open_word(event: str, args: tuple, frame: Any) -> Optional[tuple]:
    path, mode, flags = (tuple(args) + (None, None, None))[:3]
    writes = (isinstance(mode, str) and bool(set(mode) & set("wxa+"))) or (
        mode is None and isinstance(flags, int) and bool(flags & _WRITING_FLAGS))
    full = _full(path) if writes else None
    if full is None or _recorder_module._ignored(full):
        return None
    existed = os.path.lexists(full)
    exclusive = (isinstance(mode, str) and "x" in mode) or (isinstance(flags, int) and bool(flags & os.O_EXCL))
    appends = (isinstance(mode, str) and "a" in mode) or (isinstance(flags, int) and bool(flags & os.O_APPEND))
    # An appending file's size when it is opened: where its writes land, in words ("at offset N").
    size = os.path.getsize(full) if existed and appends and os.path.isfile(full) else 0
    op = Op(0, "open", api="open" if isinstance(mode, str) else "os.open", path=full, size=size,
            flags=frozenset({"existed"}) if existed else frozenset())
    return op, lambda: not (existed and exclusive) and os.path.isfile(full)


def _move_word(event: str, args: tuple, frame: Any) -> Optional[tuple]:
    src, dst = _full(args[0], args[2] if len(args) > 2 else None), _full(args[1], args[3] if len(args) > 3 else None)
    if src is None or dst is None or _recorder_module._ignored(dst):
        return None  # (a byte-code cache moved into place is left out, as the kernel's account leaves it)
    there, taken = os.path.lexists(src), os.path.lexists(dst)
    if event == "os.link":
        return Op(0, "link", api="os.link", path=src, dest=dst), lambda: there and not taken and os.path.lexists(dst)
    # Two names of one file: the rename succeeds and changes nothing (both names stay).
    same = there and taken and os.path.samestat(os.lstat(src), os.lstat(dst))
    op = Op(0, "rename", api=_named(frame, ("replace", "rename"), "os.rename"), path=src, dest=dst)
    return op, lambda: same or (there and not os.path.lexists(src) and os.path.lexists(dst))


def _remove_word(event: str, args: tuple, frame: Any) -> Optional[tuple]:
    full = _full(args[0], args[1] if len(args) > 1 else None)
    if full is None or _recorder_module._ignored(full):
        return None
    there = os.path.lexists(full)
    kind, api = ("unlink", _named(frame, ("remove", "unlink"), "os.remove")) if event == "os.remove" \
        else ("rmdir", "os.rmdir")
    return Op(0, kind, api=api, path=full), lambda: there and not os.path.lexists(full)


def _mkdir_word(event: str, args: tuple, frame: Any) -> Optional[tuple]:
    full = _full(args[0], args[2] if len(args) > 2 else None)
    if full is None or _recorder_module._ignored(full):
        return None  # a __pycache__ folder Python makes for a module imported mid-call
    there = os.path.lexists(full)
    return Op(0, "mkdir", api="os.mkdir", path=full), lambda: not there and os.path.isdir(full)


def _copy_word(event: str, args: tuple, frame: Any) -> Optional[tuple]:
    # shutil copies with sendfile, whose bytes the kernel trace does not print: they are read here,
    # before the copy, and named once the copy holds them.
    src, dst = _full(args[0]), _full(args[1])
    if src is None or dst is None or not os.path.isfile(src) or os.path.getsize(src) > _COPY_CAP:
        return None
    with open(src, "rb") as f:
        data = f.read(_COPY_CAP + 1)

    def copied() -> Optional[bool]:
        try:
            with open(dst, "rb") as f:
                return f.read(len(data) + 1) == data or None
        except OSError:
            return None
    return Op(0, "write", api="os.sendfile", path=dst, offset=0, data=data), copied


# Each event with words: (the Op it names, a check of whether its call took effect), or None.
_WORDERS = {"open": _open_word, "os.rename": _move_word, "os.link": _move_word, "os.remove": _remove_word,
            "os.rmdir": _remove_word, "os.mkdir": _mkdir_word, "shutil.copyfile": _copy_word}


def _word(event: str, args: tuple, rec: Any) -> None:
    frame = sys._getframe(3)  # the code that made the call (this, _words, the hook, then it)
    pending = _WORDERS[event](event, args, frame)
    if pending is not None:
        _pending.append([threading.get_ident(), rec, pending[0], pending[1]])


def _settle_words(final: bool = False) -> None:
    """This thread's words whose calls have taken effect go to their recorder; those that failed are
    dropped (``final``: the call is over, so a word still waiting is dropped too)."""
    me = threading.get_ident()
    for item in list(_pending):
        if item[0] != me:
            continue
        try:
            took = item[3]()
        except Exception:  # noqa: BLE001 - only words: never the learner's problem
            took = False
        if took is None and not final:
            continue
        _pending.remove(item)
        if took:
            item[1].add(item[2].kind, api=item[2].api, path=item[2].path, dest=item[2].dest, offset=item[2].offset,
                        data=item[2].data, size=item[2].size, flags=item[2].flags)


def _words(event: str, args: tuple) -> None:
    """The audit hook's share for words (see above): never raises."""
    rec = _recorder_module._active
    if (rec is None or rec.patch) and not _pending:
        return
    _words_local.busy = True
    try:
        if _pending and event == "open" and _opening(args):
            return  # the os.open an opener= makes for the open() already waiting: one call of the kernel's
        if _pending:
            _settle_words()
        if event in _WORDERS and rec is not None and not rec.patch:
            _word(event, args, rec)
    except Exception:  # noqa: BLE001 - only words: a failure here must never reach the learner's code
        pass
    finally:
        _words_local.busy = False


def _opening(args: tuple) -> bool:
    """Whether an os.open event is the opener of an open() whose word this thread is waiting on."""
    if len(args) < 2 or args[1] is not None:
        return False
    full, me = _full(args[0]), threading.get_ident()
    return full is not None and any(item[0] == me and item[2].kind == "open" and item[2].api == "open"
                                    and item[2].path == full for item in _pending)


def settle_words(final: bool = False) -> None:
    """:func:`_settle_words` from the worker's own code (its reads are not the learner's)."""
    if not _pending:
        return
    _words_local.busy = True
    try:
        _settle_words(final)
    finally:
        _words_local.busy = False


def _audit(event: str, args: tuple) -> None:
    if getattr(_words_local, "busy", False):
        return  # the worker's own look at a file, for words: not the learner's read or call
    _note_read(event, args)
    _words(event, args)


# -- serving ----------------------------------------------------------------------------------------

def _without_bytes(op: Any) -> Any:
    """A copy of a recorded write that carries its size but not its bytes (the kernel trace has them)."""
    return type(op)(op.index, op.kind, api=op.api, path=op.path, dest=op.dest, handle=op.handle, offset=op.offset,
                    size=len(op.data), flags=op.flags | {ELIDED}, is_dir=op.is_dir, payload=op.payload, note=op.note)


class Session:
    def __init__(self, folder: str, bytes_from_kernel: bool = False):
        self.folder = folder
        # The judge takes the bytes of writes in the watched folders from its kernel trace
        # (grader.grading.kernel_trace): sent here too, they would cross the pipe, and be printed by
        # the tracer, a second time. Only their sizes go.
        self.bytes_from_kernel = bytes_from_kernel
        self.modules: dict[int, tuple[Any, str]] = {}
        self.overrides: dict[int, dict] = {}  # module -> the values the judge set in it, for a fresh copy
        self.recorder: Optional[Recorder] = None
        self.sent = 0
        self.exception_types: dict[tuple, type] = {}
        self.sent_messages: dict[int, list] = {}  # callback -> the messages it last sent (pickled)
        self.pipe = threading.RLock()  # held from a callback's request to its reply
        self.turnstile = Turnstile(threading.main_thread())

    def ask_locked(self, ask: Any, *args: Any) -> Any:
        with self.pipe:
            return ask(*args)

    # things from the judge, rebuilt here
    def rebuild(self, value: Any) -> Any:
        if isinstance(value, Callback):
            return self._callback(value)
        if isinstance(value, Stand):
            cls = self._stand_type(value.type_name)
            obj = cls.__new__(cls)
            obj._crashcourse_ident = value.ident
            obj._crashcourse_text = value.text
            return obj
        if isinstance(value, list):
            return [self.rebuild(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.rebuild(v) for v in value)
        if isinstance(value, dict):
            return {self.rebuild(k): self.rebuild(v) for k, v in value.items()}
        return value

    _stand_types: dict = {}

    def _stand_type(self, name: str) -> type:
        cls = self._stand_types.get(name)
        if cls is None:
            cls = type(name if name.isidentifier() else "RuntimeObject", (),
                       {"__repr__": lambda self: self._crashcourse_text, "__module__": "judge"})
            self._stand_types[name] = cls
        return cls

    def _callback(self, cb: Callback) -> Any:
        session = self

        def call(*args: Any, **kwargs: Any) -> Any:
            # A loop may call its tools from several threads at once: one request and its reply
            # hold the pipe between them, or two messages interleave and neither side can read them.
            # Calls from the loop's own threads also go one at a time in a fixed order, as they do when
            # the loop runs in the judge's process (grader.engine.turnstile): the same code, the same trace.
            # Threads of the learner's code still running as it makes this call (a save not waited for):
            # their file operations race the call, which the judge names if the kernel saw another order.
            racing = sum(1 for t in threading.enumerate() if t.is_alive() and t is not threading.current_thread()
                         and t not in getattr(session, "threads_before", ()))
            return session.turnstile((cb.ident, repr(args)[:2000]),
                                     lambda: session.ask_locked(ask, args, kwargs, racing))

        def ask(args: tuple, kwargs: dict, racing: int) -> Any:
            # The file operations so far travel with the call, so the judge records them first.
            message = {"op": "callback", "id": cb.ident, "ops": session.take_ops()}
            if racing:
                message["threads"] = racing
            messages = kwargs.get("messages")
            kept = session.unchanged_messages(cb.ident, messages)
            plain = plain_json([list(args), dict(kwargs, messages=messages[kept:]) if kept else kwargs])
            if plain is not None:
                message["json"] = Blob(plain)  # [args, kwargs] as JSON text, read in one pass by the judge
                message["keep"] = kept  # the first `kept` messages are the ones sent last time
                session.sent_messages[cb.ident] = (session.sent_messages.get(cb.ident, [])[:kept]
                                                   + _pickled(messages[kept:])) if type(messages) is list else []
            else:
                session.sent_messages.pop(cb.ident, None)
                message.update(args=encode(list(args)), kwargs=encode(kwargs))
            # The judge's own work on the call (its model or tools, reading the kernel's trace so far) is
            # not the code's time beyond what a quick answer takes (hangs.CALL_CHARGE): on a busy machine
            # it can take seconds, and the limit must not fire for that.
            with hangs.paused(charge=hangs.CALL_CHARGE):
                send(message)
                reply = receive()
            if reply.get("resync"):
                session.sent_messages.pop(cb.ident, None)
            if reply.get("op") == "error":
                raise session.judge_exception(reply)
            return session.rebuild(reply.get("value"))

        call.__name__ = call.__qualname__ = cb.name
        call._crashcourse_ident = cb.ident
        return call

    def judge_exception(self, reply: dict) -> BaseException:
        """An exception raised in the judge (the scripted model refusing a request), raised here by name."""
        name, mro = reply.get("type", "Exception"), tuple(reply.get("mro") or ())
        cls = self.exception_types.get((name, mro))
        if cls is None:
            base = next((getattr(builtins, n) for n in mro[1:] if isinstance(getattr(builtins, n, None), type)
                         and issubclass(getattr(builtins, n), BaseException)), Exception)
            cls = type(name, (base,), {"__module__": "grader"}) if name != base.__name__ else base
            self.exception_types[(name, mro)] = cls
        return cls(reply.get("message", ""))

    def unchanged_messages(self, ident: int, messages: Any) -> int:
        """How many leading ``messages`` equal the ones last sent on this callback.

        A loop sends the model the whole conversation on every call, so the judge would read it
        again and again (quadratic in its length); only the messages after these are sent.
        """
        before = self.sent_messages.get(ident)
        if type(messages) is not list or not before:
            return 0
        kept = 0
        try:
            # Compared as pickles, not with ==: 1 == True == 1.0 in Python, but not in JSON.
            for old, new in zip(before, messages):
                if old != pickle.dumps(new, protocol=pickle.HIGHEST_PROTOCOL):
                    break
                kept += 1
        except Exception:  # noqa: BLE001 - something pickle cannot carry: send everything
            return 0
        return kept

    def take_ops(self) -> list:
        """The recorder's operations not sent yet, encoded."""
        rec = self.recorder
        if rec is not None and not rec.patch:
            settle_words()
        if rec is None or len(rec.ops) == self.sent:
            return []
        ops = rec.ops[self.sent:]
        self.sent = len(rec.ops)
        if self.bytes_from_kernel and rec.watch:
            roots = tuple(root + os.sep for root in rec.watch)
            ops = [_without_bytes(op) if op.kind == "write" and op.data and op.api not in COPIES
                   and op.path and op.path.startswith(roots) else op for op in ops]
        return [encode(op) for op in ops]

    # requests
    def load(self, request: dict) -> dict:
        filename = request["filename"]
        path = os.path.join(self.folder, filename)
        name = f"crashcourse_submission_{os.path.splitext(filename)[0]}_{next(_counter)}"
        limit = _seconds(request.get("limit"))
        try:
            with hangs.time_limit(limit, owner=path, told=_seconds(request.get("told"))):  # a top level that never ends
                module = loader.import_file(path, name=name)
        except BaseException as exc:  # noqa: BLE001 - a student's module may raise anything, SystemExit too
            failed = {"op": "load_failed", "error": describe_exception(exc, filename)}
            return _with_hang(failed, exc)
        ident = next(_counter)
        self.modules[ident] = (module, filename)
        names = {}
        for attr, value in list(vars(module).items()):
            if attr.startswith("__"):
                continue
            if isinstance(value, type):
                if issubclass(value, BaseException):
                    names[attr] = {"kind": "exception", "mro": [[c.__name__, c.__module__ == name]
                                                                for c in value.__mro__]}
                else:
                    names[attr] = {"kind": "class"}
            elif callable(value):
                names[attr] = {"kind": "function"}
            elif type(value).__module__ == "builtins" and not isinstance(value, type(sys)):
                names[attr] = {"kind": "value", "value": encode(value)}
        return {"op": "loaded", "module": ident, "module_name": name, "names": names}

    def set_value(self, request: dict) -> dict:
        """A module-level value a check sets before it calls the code (``MAX_TURNS = 2``)."""
        try:
            module, _ = self.modules[request["module"]]
            value = self.rebuild(request.get("value"))
            setattr(module, str(request["name"]), value)
            self.overrides.setdefault(request["module"], {})[str(request["name"])] = value
        except BaseException as exc:  # noqa: BLE001 - a module whose __setattr__ misbehaves
            return {"op": "error", "error": describe_exception(exc)}
        return {"op": "ok"}

    def call_fresh(self, request: dict) -> Optional[dict]:
        """``call``, in a child of the fork server that never ran anything of the submission's
        (grader.engine.fresh): it imports the file afresh, sets the judge's values, answers the judge
        itself, and exits. None when it answered; else what to tell the judge."""
        module, filename = self.modules[request["module"]]
        fn = getattr(module, str(request.get("name")), None)
        try:
            fresh.run_fresh(_fresh_call, fn, dict(request, fresh=False), self.folder, self.bytes_from_kernel,
                            filename, module=module, module_name=module.__name__,
                            settings=self.overrides.get(request["module"]), timeout=FRESH_LIMIT)
        except fresh.FreshProcessDied as exc:
            return {"op": "raise", "error": {"type": "SystemExit", "module": "builtins",
                                             "mro": ["SystemExit", "BaseException", "object"],
                                             "message": f"the process running it ended before it returned: {exc}",
                                             "where": "", "code": None}}
        except (EOFError, BrokenPipeError):
            # The fork server is gone: the child (forked from it, so its parent) killed it, maybe after it
            # had answered the judge itself. No answer from here could be trusted to be this call's, and
            # no server can be started again that never saw the submission: this worker ends.
            os._exit(FORK_SERVER_KILLED)
        except Exception as exc:  # noqa: BLE001 - this worker serves every later call: a kit fault is told, not fatal
            return {"op": "raise", "error": {"type": "RuntimeError", "module": "builtins",
                                             "mro": ["RuntimeError", "Exception", "BaseException", "object"],
                                             "message": f"the grader could not start a fresh process for it "
                                                        f"({type(exc).__name__}: {exc})", "where": "", "code": None}}
        return None

    def call(self, request: dict) -> dict:
        module, filename = self.modules[request["module"]]
        self.sent_messages = {}  # the judge forgets them too when a call starts
        fn = getattr(module, request["name"])
        args = self.rebuild(request.get("args", []))
        kwargs = self.rebuild(request.get("kwargs", {}))
        os.chdir(request.get("cwd") or self.folder)
        watch = request.get("watch")
        outcome: dict
        global _reads
        self.sent = 0
        # namespaces: names the submission bound at import (`from os import replace`) are recorded too.
        # Under a kernel trace nothing is patched: the kernel's account is the one, and this recorder
        # only carries words for it (see "words" above).
        patch = not self.bytes_from_kernel
        # Writes are not joined here: the operations go to the judge as the call goes, and the judge's
        # recorder joins them as it takes them (a joined write could still grow after it was sent).
        self.recorder = (Recorder(watch=watch, namespaces=_recorder_module.namespaces_of(fn) if patch else (),
                                  patch=patch, join_writes=False) if watch is not None else None)
        _reads = []
        undo: dict = {}
        for name in request.get("forward") or ():
            if name in FORWARDED:
                undo.update(FORWARDED[name]())
        # The judge's time limit, a little shorter: a hang is stopped here, where the learner's own
        # frames say which function, file and line (the judge only sees itself waiting on a pipe).
        limit, told = _seconds(request.get("limit")), _seconds(request.get("told"))
        try:
            # The system temp folder is a file system apart from the folder the call runs in, as in the
            # judge's own process (grader.engine.recorder.temp_folder_apart; in the box it really is).
            with hangs.time_limit(limit, owner=fn, told=told), _apart(os.getcwd()):
                if self.recorder is not None:
                    with self.recorder:
                        value = fn(*args, **kwargs)
                else:
                    value = fn(*args, **kwargs)
            outcome = {"op": "return", "value": encode(value)}
        except BaseException as exc:  # noqa: BLE001 - reported as data; the judge decides what it means
            outcome = _with_hang({"op": "raise", "error": describe_exception(exc, filename)}, exc)
        finally:
            for name, fn in undo.items():
                setattr(os, name, fn)
        if self.recorder is not None:
            if not self.recorder.patch:
                settle_words(final=True)
                _pending.clear()  # words of threads still running: their calls may not have happened
            outcome["ops"] = self.take_ops()
            outcome["unseen"] = list(dict.fromkeys(self.recorder.unseen))[:50]
        self.recorder = None
        outcome["reads"], _reads = _reads, None
        if _Capped.dropped:
            outcome["dropped_output"] = _Capped.dropped
        outcome["args"] = encode(args)
        outcome["kwargs"] = encode(kwargs)
        return outcome


def _apart(folder: str) -> Any:
    """The system temp folder made a file system apart from ``folder`` (a rename between them refused
    with EXDEV, as on a usual machine: grader.engine.recorder.temp_folder_apart), by patching os only
    where the kernel would not refuse it itself: in the box the two are file systems apart already, and
    nothing is replaced that code could compare with ``posix``."""
    import contextlib
    import tempfile
    try:
        apart = os.stat(tempfile.gettempdir()).st_dev != os.stat(folder).st_dev
    except OSError:
        apart = False
    return contextlib.nullcontext() if apart else _recorder_module.temp_folder_apart(folder)


FRESH_LIMIT = 60.0  # a fresh call still running after twice this (and a grace) is killed; the judge's limit is less


_parent_at_fork: Optional[int] = None  # in a forked process: its parent when it was forked


def _forked() -> None:
    global _parent_at_fork
    _parent_at_fork = os.getppid()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def _gone(server: int) -> bool:
    """Whether the fork server this child came from is dead or dying: this child was handed to another
    parent, or the server has a SIGKILL pending, or is exiting (its stat flags: PF_EXITING)."""
    if os.getppid() != server:
        return True
    try:
        with open(f"/proc/{server}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        if fields[0] in (b"Z", b"X", b"x") or int(fields[6]) & 0x4:
            return True
        with open(f"/proc/{server}/status", "rb") as f:
            return any(line.startswith((b"SigPnd:", b"ShdPnd:")) and int(line.split()[1], 16) & (1 << 8)
                       for line in f)
    except (OSError, ValueError, IndexError):
        return False  # no /proc to look in: the parent's pid said it is alive


def _fresh_call(fn: Any, request: dict, folder: str, bytes_from_kernel: bool, filename: str) -> str:
    """In the fresh child: make the call as ``Session.call`` does, and answer the judge on its pipe."""
    session = Session(folder, bytes_from_kernel)
    session.modules[request["module"]] = (types.SimpleNamespace(**{request["name"]: fn}), filename)
    outcome = session.call(request)
    if _parent_at_fork is not None and _gone(_parent_at_fork):
        # The code killed the fork server this child came from (at import, say): the worker ends and
        # the judge is told so (FORK_SERVER_KILLED). An answer sent now would race that news, and be
        # taken or not by how fast the call ran.
        os._exit(1)
    send(outcome)
    return "answered"


class _Capped:
    """``sys.stdout`` or ``sys.stderr`` passing on only what the judge keeps of a submission's output.

    The judge keeps the first :data:`KEPT` bytes and counts the rest; the kernel trace prints every
    byte written to the output pipe. A correct loop that prints megabytes would make the tracer print
    them all, and the judge read them, to keep a few kilobytes: past :data:`KEPT` its prints are only
    counted here (and the count reported with each call). A direct ``os.write(1, ...)`` still goes out.
    """

    KEPT = 64 * 1024  # grader.grading.sandbox.Limits.output
    written = 0  # shared by both streams, as the judge's count is
    dropped = 0

    def __init__(self, stream: Any):
        self._stream = stream

    def write(self, text: str) -> int:
        size = len(text.encode("utf-8", "surrogateescape")) if isinstance(text, str) else len(text)
        room = _Capped.KEPT - _Capped.written
        if size <= room:
            _Capped.written += size
            return self._stream.write(text)
        head = text[:max(room, 0)]  # a character is at least a byte: this is at most `room` characters
        if head:
            self._stream.write(head)
            size -= len(head.encode("utf-8", "surrogateescape")) if isinstance(head, str) else len(head)
        _Capped.written = _Capped.KEPT
        _Capped.dropped += max(size, 0)
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


PYTEST_VARIABLES = ("PYTEST_CURRENT_TEST", "PYTEST_VERSION")  # grader.grading.stand_in.PYTEST_VARIABLES


def as_in_pytest(values: Any) -> None:
    """The environment a learner's own pytest gives the code during a test: its two variables, with the
    judge's values (the test and phase running now, pytest's version), so a graded call looks the same."""
    if not isinstance(values, list) or len(values) != len(PYTEST_VARIABLES):
        return
    for name, value in zip(PYTEST_VARIABLES, values):
        if isinstance(value, str) and value.isprintable():
            os.environ[name] = value[:500]
        else:
            os.environ.pop(name, None)


def _looks_like_pytest() -> None:
    """``sys.argv`` as a learner's own ``pytest`` run has it (its entry point), not ``-c``."""
    import importlib.util
    spec = importlib.util.find_spec("pytest")
    sys.argv = [os.path.join(os.path.dirname(spec.origin), "__main__.py") if spec and spec.origin else "pytest"]


def _settings_of_a_pytest_run() -> None:
    """What a learner's own ``pytest exercises/levelN`` has set by the time their code runs, set here the
    same way, so that none of it tells a graded call from a call in their own run (each changes nothing
    the code does): pytest's faulthandler writes a crash's stack to stderr, its hooks take exceptions
    raised in threads and unraisable ones (here they hand them to Python's own), and the kit's plugin
    freezes what was loaded and collects the youngest objects every 10,000 (grader.faces.plugin)."""
    import faulthandler
    import functools
    import gc
    faulthandler.enable()
    threading.excepthook = functools.partial(_pass_on, threading.__excepthook__)
    sys.unraisablehook = functools.partial(_pass_on, sys.__unraisablehook__)
    gc.freeze()
    gc.set_threshold(10000, 10, 10)


def _pass_on(hook: Any, what: Any) -> None:
    hook(what)


def serve(folder: str, bytes_from_kernel: bool = False) -> None:
    session = Session(folder, bytes_from_kernel)
    if bytes_from_kernel:
        sys.stdout, sys.stderr = _Capped(sys.stdout), _Capped(sys.stderr)
    send({"op": "ready", "pid": os.getpid()})
    while True:
        try:
            request = receive()
        except EOFError:
            return
        op = request.get("op")
        if op == "load":
            as_in_pytest(request.get("pytest"))  # imported during a test, as a learner's own pytest imports it
            send(session.load(request))
        elif op == "call":
            as_in_pytest(request.get("pytest"))
            session.threads_before = set(threading.enumerate())  # any thread started after this is the code's
            reply = session.call_fresh(request) if request.get("fresh") else session.call(request)
            if reply is not None:
                send(reply)
        elif op == "setattr":
            send(session.set_value(request))
        elif op == "misbehave" and isinstance(request.get("fault"), dict):
            # Only where no tracer can make the fault (see grader.grading.faults): os is patched here.
            session.faulty = MisbehavingOs(request["fault"])
            session.faulty.arm()
            send({"op": "ok"})
        elif op == "misbehaved":
            faulty = getattr(session, "faulty", None)
            send({"op": "misbehaved", "failed": len(faulty.failed) if faulty else 0,
                  "whole_syncs": bool(faulty and faulty.whole_syncs)})
        elif op == "platform" and request.get("name") in PLATFORMS:
            # A check that makes a platform misbehave (level 3's "a folder cannot be opened"): the
            # look of that platform is made here; the refusal itself comes from the tracer outside.
            PLATFORMS[request["name"]]()
            send({"op": "ok"})
        elif op == "bye":
            return


def _options(argv: list) -> dict:
    """``--name value`` pairs. The judge builds this command line; argparse would cost every worker
    a noticeable share of its start-up for four options."""
    if len(argv) % 2 or any(not name.startswith("--") for name in argv[::2]):
        raise SystemExit("usage: python -m grader.grading.worker --read FD --write FD --folder PATH [--bytes kernel] "
                         "[--pytest VERSION]")
    options = {name[2:]: value for name, value in zip(argv[::2], argv[1::2])}
    missing = {"read", "write", "folder"} - set(options)
    if missing:
        raise SystemExit(f"grader.grading.worker: missing --{', --'.join(sorted(missing))}")
    return options


def main(argv: Optional[list] = None) -> None:
    global _read_fd, _write_fd
    options = _options(sys.argv[1:] if argv is None else list(argv))
    _read_fd, _write_fd = int(options["read"]), int(options["write"])
    # Keep only the two pipes: any other descriptor inherited (the kernel trace strace writes to,
    # see grader.grading.kernel_trace) is closed before the submission's code can reach it.
    start = 3
    for fd in sorted({_read_fd, _write_fd}):
        os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, 1 << 16)
    # sys.dont_write_bytecode stays as any run has it (unset): the kit and the interpreter are bound
    # read-only in the box, so a compiled file can land only in the box's own folders, which are thrown
    # away; byte-code caches are left out of both accounts (kernel_trace._left_out, recorder._ignored).
    sys.addaudithook(_audit)
    _looks_like_pytest()
    _settings_of_a_pytest_run()
    if options.get("pytest"):
        # Set before the fork server starts, as pytest sets it before it imports anything: a fresh
        # child imports the learner's file with it, as in the learner's own run.
        os.environ["PYTEST_VERSION"] = options["pytest"]
    # The judge asks for one call at a time, so one fork server is enough (and each process counts
    # against the box's cap). Each child compiles the file itself: code sent through a pipe would be
    # printed in the kernel trace hundreds of times over, and count against its cap.
    fresh.start(servers=1, send_code=False)
    serve(options["folder"], options.get("bytes") == "kernel")
    # Leave at once: a non-daemon thread a submission started must not keep this process alive.
    os._exit(0)


if __name__ == "__main__":
    main()
