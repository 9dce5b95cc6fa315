"""What the student commands share: the kit, where state is kept, how paths and text are shown.

Every command reads the level list from ``exercises/manifest.json`` (:mod:`grader.levels.manifest`)
through :func:`kit_manifest`, and keeps what it remembers between runs (which hints were shown,
the last check's verdict) in ``.crashcourse/`` beside the learner's files.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable, Optional

from grader.atomicfile import write_atomic
from grader.faces import matrix
from grader.levels import manifest as manifest_mod
from grader.levels import registry

STATE_DIR = ".crashcourse"


def kit_manifest() -> manifest_mod.Manifest:
    return manifest_mod.load()


def say(text: str = "", stream: Any = None) -> None:
    print(text, file=stream or sys.stdout)


def rel(path: Path) -> str:
    """``path`` relative to the current folder when it lies inside it, else absolute."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if rel.startswith("..") else rel


def _state_path(name: str) -> Path:
    return Path.cwd() / STATE_DIR / name


def read_state(name: str) -> dict:
    try:
        return json.loads(_state_path(name).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}


def write_state(name: str, data: dict) -> None:
    path = _state_path(name)
    try:
        path.parent.mkdir(exist_ok=True)
        # Whole or not at all, as the lesson teaches; no folder fsync, since a power cut that
        # brings back the previous state only means a hint is shown again.
        write_atomic(path, json.dumps(data, indent=1, sort_keys=True), durable=False)
    except OSError:
        pass  # a read-only folder only costs the memory of which hints were shown


def files_signature(paths: list[Path]) -> list:
    out = []
    for path in paths:
        try:
            st = os.stat(path)
            out.append([str(path), st.st_mtime_ns, st.st_size])
        except OSError:
            out.append([str(path), None, None])
    return out


def level_column(title: str, folder: Path, level: manifest_mod.Level, seed: int = 0) -> Optional[matrix.Column]:
    """The level's matrix column for the files in ``folder``, or None if its level module draws none."""
    return matrix.level_column(title, folder, level, seed)


def render(columns: list, level: manifest_mod.Level, paint: matrix.Painter, legend: bool = True,
            told_below: bool = False) -> str:
    return matrix.render(columns, width=matrix.terminal_width(), paint=paint, legend=legend, told_below=told_below,
                         **level.plugin.render_options(level))


def level_heading(level: manifest_mod.Level, paint: matrix.Painter) -> str:
    return paint.bold(level.label)


def engine_words(level: manifest_mod.Level) -> str:
    return level.plugin.engine_words(level)


def wrap_block(text: str, width: int, indent: str = "") -> str:
    """Wrap each line of ``text`` to ``width``, keeping its indent; commands stay on one line to copy."""
    out = []
    for line in text.splitlines():
        lead = indent + line[:len(line) - len(line.lstrip())]
        if "pytest " in line or len(indent + line) <= width:
            out.append(indent + line)
        else:
            out.extend(textwrap.wrap(line.strip(), width, initial_indent=lead, subsequent_indent=lead + "  ",
                                     break_on_hyphens=False))
    return "\n".join(out)


def load_declarations(level: manifest_mod.Level) -> None:
    """Import the level's module, which declares its checks and causes (in :mod:`grader.levels.registry`)."""
    try:
        level.plugin  # noqa: B018 - importing the module is the point
    except Exception:  # noqa: BLE001 - a level module that will not load declares nothing; selfcheck says why
        pass


def cause_words(level: manifest_mod.Level, cause: str) -> str:
    """What ``cause`` means, in the words of the level that declared it ("" if none did)."""
    load_declarations(level)
    return registry.cause_words(cause)


def level_or_say(number: int) -> Optional[manifest_mod.Level]:
    """The manifest's level ``number``, or None after saying why there is none."""
    try:
        return kit_manifest().require(number)
    except manifest_mod.ManifestError as exc:
        say(str(exc))
        return None


def folder_for(level: manifest_mod.Level, path: Optional[str]) -> Path:
    if path is None and level.root.resolve() == manifest_mod.PACKAGED_KIT.resolve():
        # No workspace around: the files are the installed package's own copies, not the learner's.
        say("(No workspace here, so this reads the copy inside the installed package. For files of your own: "
             "crashcourse init my-course && cd my-course)", sys.stderr)
    return Path(path).resolve() if path else level.starter_dir



def wrapped(parser_factory: Callable) -> Callable:
    """``sub.add_parser`` that wraps each description paragraph to 80 columns (examples kept as written)."""
    def add_parser(name: str, **kwargs: Any) -> Any:
        text = kwargs.get("description")
        if text:
            parts = text.split("\n\n")
            parts = [p if p.startswith(("example", "  ")) else textwrap.fill(p, 80) for p in parts]
            kwargs["description"] = "\n\n".join(parts)
        return parser_factory(name, **kwargs)
    return add_parser
