"""One way to import a learner's file, and one way to say why it would not import.

Every place that runs a submission's file (the pytest plugin, the crash matrix, the grading
worker, the batch's warm-up, an instructor's scenario file) imports it through
:func:`import_file`, and every place that explains a failed import uses :func:`import_problem`,
so a syntax error reads the same in ``pytest``, ``crashcourse check`` and ``crashcourse grade``.

No pytest here, and no pathlib: the grading worker, which imports the learner's code, imports this
on every start, and pathlib alone would be a fifth of what it imports.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import marshal
import os
import sys
import weakref
from types import ModuleType
from typing import Any, Optional, Union

__all__ = ["ImportProblem", "import_file", "load_file", "import_problem", "describe_exception", "last_frame"]

_counter = itertools.count()
MADE: set = set()            # the names of the modules import_file made: the learner's files
_LIVE: "weakref.WeakSet" = weakref.WeakSet()  # those modules themselves, while anything holds them
BEFORE_FIRST_IMPORT: list = []  # called once, before the first learner file is imported in this process


class ImportProblem(Exception):
    """A learner's file could not be imported; ``str(exc)`` says why, in words meant for them."""


def import_file(path: Union[str, "os.PathLike[str]"], tag: str = "submission", name: Optional[str] = None,
                code: Optional[bytes] = None) -> ModuleType:
    """Import ``path`` as a new module, a fresh copy on every call (so an edited file is always seen).

    The module stays in ``sys.modules`` under its own name, as an imported module does: dataclasses
    and pickle look it up there, and so does code that reads ``sys.modules[__name__]`` when it runs
    (a setting such as ``MAX_TURNS``, changed on the module after import). Each copy has a name of its
    own, so two copies never meet; a file that fails to import is taken out again. Whatever the file raises
    propagates unchanged, ``SystemExit`` included. ``name``: the module's name, if the caller
    numbers its modules itself. ``code``: the file already compiled (``marshal``), to run instead of
    compiling it again (grader.engine.fresh compiles once for its hundreds of children).
    """
    if BEFORE_FIRST_IMPORT:
        # (grader.engine.fresh's fork server: it must never have seen a learner's code)
        hooks, BEFORE_FIRST_IMPORT[:] = list(BEFORE_FIRST_IMPORT), []
        for hook in hooks:
            hook()
    path = os.fspath(path)
    # The file's own folder first on the path, as `python agent.py` and pytest's rootdir insertion put
    # it: a helper module the learner keeps beside the file (`from ckptio import ...`) imports the same
    # in the run, in every fresh process and in grade's box, wherever the folder was copied to.
    # Moved to the front if it is already further down: a folder listed earlier could hold a module of
    # the same name, which `python agent.py` would never see.
    folder = os.path.dirname(os.path.abspath(path))
    if not sys.path or sys.path[0] != folder:
        if folder in sys.path:
            sys.path.remove(folder)
        sys.path.insert(0, folder)
    stem = os.path.splitext(os.path.basename(path))[0]
    name = name or f"crashcourse_{tag}_{stem}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    MADE.add(name)
    _LIVE.add(module)
    sys.modules[name] = module
    try:
        if code is None:
            spec.loader.exec_module(module)
        else:
            exec(marshal.loads(code), module.__dict__)  # noqa: S102 - what exec_module does with the compiled file
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def made_modules() -> list:
    """The learner's modules :func:`import_file` made that are still alive (their names bound at import
    are swapped while code runs: grader.engine.recorder.temp_folder_apart)."""
    return list(_LIVE)


def load_file(path: Union[str, "os.PathLike[str]"], tag: str = "submission") -> ModuleType:
    """:func:`import_file`, with any failure to import turned into :class:`ImportProblem`."""
    try:
        return import_file(path, tag)
    except BaseException as exc:  # noqa: BLE001 - a learner's file may raise anything, SystemExit too
        if isinstance(exc, KeyboardInterrupt):
            raise
        filename = os.path.basename(os.fspath(path))
        raise ImportProblem(import_problem(filename, describe_exception(exc, filename))) from exc


_PLAIN_ARGS = (str, int, float, bool, bytes, type(None))


def describe_exception(exc: BaseException, filename: str = "", encode: Any = None) -> dict:
    """An exception as plain data (what the grading worker sends the judge): type, message, where.

    ``encode`` turns ``SystemExit.code`` into data that can travel; by default it is kept as it is.
    """
    import traceback  # only when something failed: most workers never need it

    frames = traceback.extract_tb(exc.__traceback__)
    keep = [f for f in frames if filename and os.path.basename(f.filename) == filename] or frames[-1:]
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - a learner's __str__ may raise anything
        message = "(the exception's message could not be read)"
    code = None
    if isinstance(exc, SystemExit):
        code = encode(exc.code) if encode is not None else exc.code
    shown = None
    if isinstance(exc, SyntaxError):
        # As Python prints it (the line, the caret), with the file named as the learner names it.
        shown = "".join(traceback.format_exception_only(type(exc), exc))
        if exc.filename and filename:
            shown = shown.replace(f'File "{exc.filename}"', f'File "{filename}"')
        shown = shown[:2000]
    # The constructor's own arguments, where they are plain values, so the judge can build the same
    # exception again (a UnicodeDecodeError takes five; its message alone would not rebuild it).
    args, given = None, exc.args
    if isinstance(exc, OSError) and len(given) == 2 and exc.filename is not None:
        given = (*given, exc.filename) + ((None, exc.filename2) if exc.filename2 is not None else ())
    if len(given) <= 8 and all(type(a) in _PLAIN_ARGS for a in given) \
            and sum(len(a) for a in given if isinstance(a, (str, bytes))) <= 1 << 20:
        args = [encode(a) if encode is not None else a for a in given]
    return {"type": type(exc).__name__, "module": type(exc).__module__, "args": args,
            "mro": [c.__name__ for c in type(exc).__mro__], "message": message[:2000],
            "where": "".join(traceback.format_list(keep[-3:]))[:2000],
            "lineno": getattr(exc, "lineno", None), "msg": getattr(exc, "msg", None) if isinstance(exc, SyntaxError)
            else None, "code": code, "shown": shown}


def import_problem(filename: str, error: dict) -> str:
    """Why ``filename`` did not import, from :func:`describe_exception`'s data, in the learner's words."""
    kind = error.get("type")
    if kind in ("SyntaxError", "IndentationError", "TabError"):
        shown = error.get("shown")
        if isinstance(shown, str) and shown.strip():
            return (f"{filename} has a syntax error on line {error.get('lineno')}, so Python cannot run it:\n\n"
                    f"{shown.rstrip()}\n\nFix it, then re-run.")
        return (f"{filename} has a syntax error on line {error.get('lineno')}: {error.get('msg') or error.get('message')}. "
                "Fix it, then re-run.")
    if kind == "SystemExit":
        try:
            code = json.dumps(error.get("code"))
        except (TypeError, ValueError):
            code = repr(error.get("code"))
        return (f"Importing {filename} called sys.exit({code}). A file that ends the "
                "program when it is imported cannot be graded: the grader counts only the checks it saw pass.")
    where = last_frame(error.get("where"))
    return f"Importing {filename} raised {kind}: {error.get('message')}" + (f" [{where}]" if where else "")


def last_frame(where: Optional[Any]) -> str:
    """``"agent.py, line 12, in save_checkpoint"`` from a formatted traceback ('' if there is none)."""
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
