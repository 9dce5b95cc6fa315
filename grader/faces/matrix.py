"""The crash matrix: where a crash lands in the loop, and what a resume would find there.

One row per crash point, named in the loop's words ("turn 2, save point A, after write"); one
column per loop (the starter beside the solution, or just your code); each cell says what a resume
would find after a crash there: ``ok``, ``torn file``, ``untraced tool call``, ``stale pending
call``, ``counters off``, ...  Consecutive crash points with the same verdicts share one line, so
the whole run of a loop fits on a screen.

The verdicts come from :func:`grader.engine.explore.explore_loop`, the same engine the level's tests use.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any, Optional

from grader.levels import registry
from grader.levels.columns import (MODEL_GROUPS, NOWHERE, OK, PHASE_WORDS, STEP_WORDS, Column,  # noqa: F401
                                   column, failed_column, load_module, models_line, models_words, row_key,
                                   verdict)

WIDTH = 100


# --- several columns side by side -----------------------------------------------------------------


def merge_keys(columns: list[Column]) -> list:
    """The union of every column's rows, each column's order kept (rows a loop shares stay aligned)."""
    merged: list = []
    for col in columns:
        keys = list(col.cells)
        if not merged:
            merged = keys
            continue
        out: list = []
        matcher = difflib.SequenceMatcher(None, merged, keys, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            out.extend(merged[i1:i2])
            if tag != "equal":
                out.extend(k for k in keys[j1:j2] if k not in out and k not in merged[i2:])
        merged = out
    return merged


SEVERITY = ("stuck", "save failed", "no file", "empty file", "torn file", "wrong fields", "untraced tool call",
            "unpaired tool call", "lost result", "call run twice", "stale pending call", "counters off", "older save", "mixed save",
            "temp file elsewhere", "bad resume")


def cell_text(words: list) -> str:
    """One cell: the worst verdict, and how many other kinds share these crash points (``+2``)."""
    if len(words) <= 1:
        return words[0] if words else OK

    def rank(word: str) -> tuple:
        base = word.split(": ", 1)[-1]
        return (word.startswith("power cut:"), SEVERITY.index(base) if base in SEVERITY else len(SEVERITY))

    ordered = sorted(words, key=rank)
    return f"{ordered[0]} +{len(ordered) - 1}"


def _range_label(first: tuple, last: tuple) -> str:
    def one(label: tuple) -> str:
        return f"{label[0]}, {label[1]}" if label[1] else label[0]

    if first == last:
        return one(first)
    if first[0] == last[0]:
        return f"{first[0]}, {first[1]} … {last[1]}" if first[1] else f"{first[0]} … {last[1]}"
    head = one(first)
    tail = one(last)
    turn_prefix = first[0].split(",")[0] + ","
    if first[0].startswith("turn ") and tail.startswith(turn_prefix):
        tail = tail[len(turn_prefix):].lstrip()
    return f"{head} … {tail}"


class Painter:
    """Colour on a terminal only, and never when NO_COLOR is set (https://no-color.org)."""

    def __init__(self, stream: Any = None, enabled: Optional[bool] = None):
        stream = stream or sys.stdout
        if enabled is None:
            enabled = (hasattr(stream, "isatty") and stream.isatty() and not os.environ.get("NO_COLOR")
                       and os.environ.get("TERM") != "dumb")
        self.enabled = bool(enabled)

    def __call__(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.enabled and code else text

    def cell(self, text: str, padded: str) -> str:
        if text == OK or text.startswith("ok "):
            return self(padded, "32")
        if text == NOWHERE:
            return self(padded, "2")
        return self(padded, "31")

    def bold(self, text: str) -> str:
        return self(text, "1")


def _unshown_lines(col: Column, told_below: bool) -> list[str]:
    """A column with no cells to draw: its summary, and why its run could not be drawn."""
    lines = [f"  {col.summary()}"]
    # A stuck loop's whole story is told once, with the first failure, not here as well.
    e = col.exploration
    if e is not None and (e.error or e.unseen) and col.stuck is None:
        if told_below:
            said = (e.raised() if e.traced() else "") or e.in_brief()
            lines.append(f"    {said}; the first failure below shows it in full")
        else:
            lines.extend("    " + line for line in e.report().splitlines()[:12])
    return lines


def _rows(shown: list[Column], group: bool) -> list:
    """``[first label, last label, cells]`` per row; ``group`` merges neighbouring rows that agree."""
    rows: list = []
    for key in merge_keys(shown):
        cells = tuple(cell_text(c.cells[key]) if key in c.cells else NOWHERE for c in shown)
        # A row is named as a save point when any loop shown saved there.
        label = next((c.labels[key] for c in shown if key in c.labels and key not in c.unsaved),
                     next(c.labels[key] for c in shown if key in c.labels))
        if group and rows and rows[-1][2] == cells:
            rows[-1][1] = label
        else:
            rows.append([label, label, cells])
    return rows


def _row_lines(first: tuple, last: tuple, cells: tuple, label_width: int, cell_width: list,
               paint: Painter) -> list[str]:
    """One row, its label and each cell wrapped to their widths, as lines."""
    wrapped = textwrap.wrap(_range_label(first, last), label_width, subsequent_indent="  ") or [""]
    cell_lines = [textwrap.wrap(text, w) or [""] for text, w in zip(cells, cell_width)]
    height = max(len(wrapped), *(len(c) for c in cell_lines))
    lines = []
    for i in range(height):
        text = "  " + (wrapped[i] if i < len(wrapped) else "").ljust(label_width)
        for j, w in enumerate(cell_width):
            part = cell_lines[j][i] if i < len(cell_lines[j]) else ""
            text += "  " + paint.cell(cells[j], part) + " " * (w - len(part)) if part else "  " + " " * w
        lines.append(text.rstrip())
    return lines


def _note_words(cells: tuple, used: list) -> None:
    """Add to ``used`` the legend words these cells show (a power cut's trouble, and "+N")."""
    for text in cells:
        word = re.sub(r" \(.*\)$", "", text.split(" +")[0])
        for part in (("power cut:", word.split(": ", 1)[1]) if word.startswith("power cut:") else (word,)):
            if part not in used:
                used.append(part)
        if " +" in text and "+N" not in used:
            used.append("+N")


def _legend_lines(shown: list[Column], used: list, width: int) -> list[str]:
    """What each word shown means, in the words of the levels drawn (headed as the first column's level says)."""
    lines = ["", f"  {shown[0].meaning.legend}"]
    # Cell words and their lines, declared with the checks: the drawn levels' own words first.
    known = registry.legend_for(c.namespace for c in shown)
    words = [w for w in known if w in used]
    pad = max(len(w) for w in words) + 2 if words else 2
    for word in words:
        lines.append(textwrap.fill(known[word], width, initial_indent="    " + word.ljust(pad),
                                   subsequent_indent=" " * (4 + pad)))
    return lines


def render(columns: list[Column], *, width: int = WIDTH, paint: Optional[Painter] = None, legend: bool = True,
           group: bool = True, heading: str = "crash point", told_below: bool = False) -> str:
    """The matrix as text at most ``width`` columns wide; ``group`` merges neighbouring rows that agree;
    ``told_below``: a run that raised is shown in full further down (check's first failure), so here
    it gets one line."""
    paint = paint or Painter(enabled=False)
    shown = [c for c in columns if c.cells]
    lines: list[str] = [line for col in columns if col not in shown for line in _unshown_lines(col, told_below)]
    if not shown:
        return "\n".join(lines)
    rows = _rows(shown, group)
    cell_width = [min(max([len(c.title)] + [len(r[2][i]) for r in rows]), 30) for i, c in enumerate(shown)]
    label_width = max(30, width - 2 - sum(w + 2 for w in cell_width))
    header = "  " + heading.ljust(label_width) + "".join("  " + c.title.ljust(w) for c, w in zip(shown, cell_width))
    lines.append(paint.bold(header.rstrip()))
    lines.append("  " + "─" * label_width + "".join("  " + "─" * w for w in cell_width))
    used: list[str] = []
    for first, last, cells in rows:
        lines.extend(_row_lines(first, last, cells, label_width, cell_width, paint))
        _note_words(cells, used)
    lines.append("")
    lines.extend(f"  {col.summary()}" for col in shown)
    if legend:
        lines.extend(_legend_lines(shown, used, width))
    return "\n".join(lines)


# --- from a folder of exercise files to a column ------------------------------------------------


def level_column(title: str, folder: Path, level: Any, seed: int = 0) -> Optional[Column]:
    """The level's column for the files in ``folder``, drawn by its level module (None: it has no matrix)."""
    return level.plugin.column(title, Path(folder), level, seed)


def terminal_width() -> int:
    return min(WIDTH, max(60, shutil.get_terminal_size((WIDTH, 24)).columns))
