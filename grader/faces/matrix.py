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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from grader.engine import loader
from grader.engine.crash_models import MODEL_NAMES
from grader.engine.explore import Exploration, Violation, explore_loop, windows_for
from grader.engine.invariants import INVARIANTS

WIDTH = 100
NOWHERE = "—"      # the loop does nothing at this point (no such crash point)
OK = "ok"

# Short cell words for each invariant, and the legend line that explains them.
LEGEND = {
    "no file": "no checkpoint.json although a save had finished (PARSE)",
    "empty file": "checkpoint.json is there but holds 0 bytes (PARSE)",
    "torn file": "checkpoint.json stops part-way through the JSON: resume cannot read it (PARSE)",
    "wrong fields": "the six fields are not all there, or have the wrong type or version (FIELDS)",
    "older save": "the file is an earlier save than the last one that finished (WHOLE)",
    "mixed save": "the file matches no state the loop saved (WHOLE)",
    "untraced tool call": "a tool had started and the file does not mention it (TRACE)",
    "unpaired tool call": "pendingToolUse and the last tool_use disagree, or a result is missing (PAIRING)",
    "lost result": "a tool result that had come back is missing from the file (KEPT)",
    "call run twice": "the loop ran one call a second time, with no crash at all (ONCE)",
    "stale pending call": "the model was called while the file still said a tool was pending (FRESH)",
    "counters off": "turns or tokensUsed disagree with the messages on disk (COUNTS)",
    "temp file elsewhere": "the temp file was renamed in from another directory (ATOMIC-DIR)",
    "bad resume": "resuming from this file does not end like a run that never crashed (RESUME)",
    "bytes grow": "each save rewrites more than what changed, so a long task writes many times its size (BYTES)",
    "power cut:": "after a power cut (only what was fsynced survives), the file shows the trouble named (DURABLE)",
    "+N": "that many other kinds of trouble at the same crash points (the test failures name each)",
    OK: "a resume would carry on correctly",
    NOWHERE: "this loop does nothing at that point, so there is no crash to show",
}


def verdict(v: Violation) -> str:
    """The cell word for one violation."""
    invariant = v.invariant
    power = invariant == "DURABLE"
    if power:
        head = v.detail.split(":", 1)[0]
        invariant = head if head in INVARIANTS else "WHOLE"
    if invariant == "PARSE":
        data = v.files.get("checkpoint.json")
        word = "no file" if data is None else "empty file" if not data else "torn file"
    elif invariant == "WHOLE":
        word = "older save" if "older save" in v.detail else "mixed save"
    else:
        word = {"FIELDS": "wrong fields", "TRACE": "untraced tool call", "PAIRING": "unpaired tool call",
                "KEPT": "lost result", "ONCE": "call run twice",
                "FRESH": "stale pending call", "COUNTS": "counters off", "ATOMIC-DIR": "temp file elsewhere",
                "RESUME": "bad resume"}.get(invariant, invariant.lower())
    return f"power cut: {word}" if power else word


# --- one loop's crash points, grouped into rows ----------------------------------------------------

PHASE_WORDS = {"before-first-response": "before the first answer", "final": "final save",
               "done": "after run_agent returned"}

STEP_WORDS = {"mkdir": "after mkdir", "open": "after open", "write": "after write", "flush": "after flush",
              "fsync": "after fsync", "close": "after close", "rename": "after rename", "unlink": "after unlink",
              "truncate": "after truncate", "link": "after link", "rmdir": "after rmdir"}


@dataclass
class Column:
    """What one loop's crash points hold: ``cells[key]`` is the list of verdicts at that row."""

    title: str
    cells: dict = field(default_factory=dict)
    labels: dict = field(default_factory=dict)
    exploration: Optional[Exploration] = None
    note: str = ""
    problems: dict = field(default_factory=dict)   # check id -> full message (level 1's resume checks)
    kind: str = "loop"

    states: int = 0
    extra_bad: list = field(default_factory=list)   # whole-run checks that failed (level 6: BYTES)
    extra_explain: str = ""                         # the lesson of the first of them

    @property
    def failed(self) -> bool:
        if self.kind in ("fields", "resume"):
            return bool(self.problems) or not self.cells
        e = self.exploration
        return e is None or not e.ok or bool(self.extra_bad)

    @property
    def tripped(self) -> set:
        """What broke, by id: invariants for loop columns, check ids for level 1 and level 4."""
        if self.kind in ("fields", "resume"):
            return set(self.problems) if self.cells else {"ERROR"}
        if self.exploration is None:
            return {"ERROR"}
        return set(self.exploration.tripped) | set(self.extra_bad)

    def summary(self) -> str:
        if self.kind == "resume" and self.cells:
            if not self.problems:
                return f"{self.title}: resumed well from all {self.states} crash states"
            return f"{self.title}: resume goes wrong ({', '.join(sorted(self.problems))})"
        if self.kind == "fields" and self.cells:
            bad = len(self.problems)
            return (f"{self.title}: all {len(self.cells)} resume checks fine" if not bad else
                    f"{self.title}: {bad} of {len(self.cells)} resume checks fail")
        e = self.exploration
        if e is None:
            return f"{self.title}: {self.note}"
        if e.error:
            return f"{self.title}: the loop did not finish even without a crash"
        if e.unseen:
            return f"{self.title}: wrote files in a way the grader cannot see"
        extra = f"; {', '.join(self.extra_bad)} broken" if self.extra_bad else ""
        if not e.violations and not e.tripped:
            return f"{self.title}: all {e.states} crash states fine{extra}"
        kinds = ", ".join(sorted(e.tripped))
        return f"{self.title}: {len(e.violations)} of {e.states} crash states broken ({kinds}){extra}"


def _phase_label(window: Any) -> tuple[tuple, str]:
    phase, turn = window.phase, window.turn
    names = getattr(window, "names", None)
    if names and phase in ("tool", "B") and len(names) > 1:
        # A turn with several calls (level 5): each call has its own rows.
        call = getattr(window, "calls", 0)
        current = getattr(window, "current", "") or window.tool_name
        if phase == "tool":
            return ("tool", turn, call), f"turn {turn}, call {call} of {len(names)} (`{current}`) running"
        return ("B", turn, call), f"turn {turn}, save point B after call {call} of {len(names)}"
    if phase == "A":
        return ("A", turn), f"turn {turn}, save point A"
    if phase == "B":
        return ("B", turn), f"turn {turn}, save point B"
    if phase == "tool":
        return ("tool", turn), f"turn {turn}, `{window.tool_name}` running"
    if phase == "model":
        return ("model", turn), f"turn {turn}, model called with the result"
    return (phase, 0), PHASE_WORDS.get(phase, phase)


def _step(op: Any) -> str:
    if op is None or op.kind not in STEP_WORDS:
        return ""  # a loop event (model or tool call) opens the phase: no file step yet
    if op.kind == "fsync" and op.is_dir:
        return "after directory fsync"
    return STEP_WORDS[op.kind]


def column(title: str, exploration: Exploration, task: str, windows_fn: Any = windows_for) -> Column:
    """Group every crash state of ``exploration`` into rows of the loop's words."""
    col = Column(title, exploration=exploration)
    if exploration.error or exploration.unseen:
        return col
    ops = exploration.ops
    windows = windows_fn(ops, task)
    bad: dict = {}
    for v in exploration.violations:
        if v.model == "none" or v.invariant == "ATOMIC-DIR":
            continue  # a fact about the whole run, not one crash state: it gets its own row below
        torn = v.operation.startswith("in the middle of")
        bad.setdefault((v.point, torn), []).append(verdict(v))
    torn_models = "M2" in exploration.models

    def add(point: int, torn: bool) -> None:
        phase_key, phase_words = _phase_label(windows[point])
        step = "mid write" if torn else _step(ops[point - 1] if point else None)
        if phase_key[0] == "done":
            step = ""
        key = phase_key + (step,)
        col.labels[key] = (phase_words, step)
        cell = col.cells.setdefault(key, [])
        for word in bad.get((point, torn), [OK]):
            if word not in cell:
                cell.append(word)

    for point in range(len(ops) + 1):
        add(point, False)
        if torn_models and point < len(ops) and ops[point].kind == "write" and (ops[point].data or ops[point].size):
            add(point, True)
    # Rows with both ok and broken states show the broken ones: a resume may land on either.
    for cell in col.cells.values():
        if len(cell) > 1 and OK in cell:
            cell.remove(OK)
    # Facts about the whole run rather than one crash state get a row of their own.
    for v in exploration.violations:
        if v.invariant == "ATOMIC-DIR" or v.model == "none":
            key = ("note", 0, v.invariant)
            col.labels[key] = ("where the temp file is renamed from" if v.invariant == "ATOMIC-DIR" else
                               f"{v.where}, {v.operation}", "")
            col.cells[key] = [verdict(v)]
    return col


def failed_column(title: str, message: str) -> Column:
    return Column(title, note=message)


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


SEVERITY = ("save failed", "no file", "empty file", "torn file", "wrong fields", "untraced tool call",
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


def render(columns: list[Column], *, width: int = WIDTH, paint: Optional[Painter] = None, legend: bool = True,
           group: bool = True, heading: str = "crash point") -> str:
    """The matrix as text at most ``width`` columns wide; ``group`` merges neighbouring rows that agree."""
    paint = paint or Painter(enabled=False)
    shown = [c for c in columns if c.cells]
    lines: list[str] = []
    for col in columns:
        if col not in shown:
            lines.append(f"  {col.summary()}")
            if col.exploration is not None and (col.exploration.error or col.exploration.unseen):
                lines.extend("    " + line for line in col.exploration.report().splitlines()[:12])
    if not shown:
        return "\n".join(lines)
    keys = merge_keys(shown)
    rows = []
    for key in keys:
        cells = tuple(cell_text(c.cells[key]) if key in c.cells else NOWHERE for c in shown)
        label = next(c.labels[key] for c in shown if key in c.labels)
        if group and rows and rows[-1][2] == cells:
            rows[-1][1] = label
        else:
            rows.append([label, label, cells])
    cell_width = [max([len(c.title)] + [len(r[2][i]) for r in rows]) for i, c in enumerate(shown)]
    cell_width = [min(w, 30) for w in cell_width]
    label_width = max(30, width - 2 - sum(w + 2 for w in cell_width))
    header = "  " + heading.ljust(label_width) + "".join("  " + c.title.ljust(w) for c, w in zip(shown, cell_width))
    lines.append(paint.bold(header.rstrip()))
    lines.append("  " + "─" * label_width + "".join("  " + "─" * w for w in cell_width))
    used: list[str] = []
    for first, last, cells in rows:
        wrapped = textwrap.wrap(_range_label(first, last), label_width, subsequent_indent="  ") or [""]
        cell_lines = [textwrap.wrap(text, w) or [""] for text, w in zip(cells, cell_width)]
        height = max(len(wrapped), *(len(c) for c in cell_lines))
        for i in range(height):
            text = "  " + (wrapped[i] if i < len(wrapped) else "").ljust(label_width)
            for j, w in enumerate(cell_width):
                part = cell_lines[j][i] if i < len(cell_lines[j]) else ""
                text += "  " + paint.cell(cells[j], part) + " " * (w - len(part)) if part else "  " + " " * w
            lines.append(text.rstrip())
        for text in cells:
            word = re.sub(r" \(.*\)$", "", text.split(" +")[0])
            for part in (("power cut:", word.split(": ", 1)[1]) if word.startswith("power cut:") else (word,)):
                if part not in used:
                    used.append(part)
            if " +" in text and "+N" not in used:
                used.append("+N")
    lines.append("")
    for col in shown:
        lines.append(f"  {col.summary()}")
    if legend:
        lines.append("")
        lines.append("  What a resume would find:")
        words = [w for w in {**LEGEND, **FIELD_LEGEND, **RESUME_LEGEND} if w in used]
        pad = max(len(w) for w in words) + 2 if words else 2
        for word in words:
            text = LEGEND.get(word) or FIELD_LEGEND.get(word) or RESUME_LEGEND[word]
            lines.append(textwrap.fill(text, width, initial_indent="    " + word.ljust(pad),
                                       subsequent_indent=" " * (4 + pad)))
    return "\n".join(lines)


# --- engines: from a folder of exercise files to a column -----------------------------------------


def load_module(path: Path, tag: str = "matrix") -> Any:
    """Import ``path`` as a fresh module (a new copy each call, so edits are always seen).

    Raises :class:`grader.engine.loader.ImportProblem`, whose text says why, if it will not import.
    """
    return loader.load_file(path, tag)


def loop_column(title: str, folder: Path, level: Any, seed: int = 0) -> Column:
    """The crash matrix column of the loop in ``folder`` on the course's scripted task."""
    from grader.engine.scripted import support_tickets

    filename = level.files[0]
    path = Path(folder) / filename
    if not path.is_file():
        return failed_column(title, f"there is no {filename} in {folder}")
    try:
        module = load_module(path)
    except loader.ImportProblem as exc:
        return failed_column(title, str(exc))
    fn = getattr(module, level.function, None)
    if not callable(fn):
        return failed_column(title, f"{filename} has no function `{level.function}`")
    models = tuple(level.crash_models) or ("M1", "M2")
    if level.engine == "journal":
        return journal_column(title, module, level, seed)
    if level.engine == "parallel":
        from grader.levels.parallel_calls import explore_parallel, parallel_tickets, parallel_windows

        scenario = parallel_tickets(seed)
        exploration = explore_parallel(fn, scenario, models=models)
        return column(title, exploration, scenario.task, parallel_windows)
    scenario = support_tickets(seed)
    exploration = explore_loop(fn, scenario, models=models, max_violations=10 ** 6)
    return column(title, exploration, scenario.task)


# --- level 1: each field, tested by crashing a run and resuming it -------------------------------

FIELD_ROWS = {
    "fields": ("the file holds exactly the six fields", "extra or missing keys"),
    "turns": ("`turns`: the turn cap across a crash", "cap overshoots"),
    "tokensUsed": ("`tokensUsed`: spend budget after a crash", "budget misfires"),
    "version": ("`version`: a file from a future format", "loads it anyway"),
    "task": ("`task`: resume says what it continues", "task unknown"),
    "messages": ("`messages`: resume continues the talk", "starts over"),
    "pendingToolUse": ("`pendingToolUse`: a crash mid-tool", "crash unnoticed"),
    "load-version": ("load refuses versions 0, 2, none", "accepts them"),
    "load-shape": ("load refuses broken or partial files", "accepts them"),
    "load-accepts": ("load returns a good file unchanged", "refuses or alters it"),
}
FIELD_LEGEND = {
    "extra or missing keys": "checkpoint.json lacks a protocol field, or carries runtime-only keys",
    "cap overshoots": "the turn count restarted at zero, so a capped task ran past its cap",
    "budget misfires": "the spend restarted at zero, so the spend budget tripped late or never",
    "loads it anyway": "a version-2 file was read as if it were version 1",
    "task unknown": "resume could not say which task it was continuing",
    "starts over": "resume had no conversation and ran every tool again",
    "crash unnoticed": "nothing on disk said a tool was cut off, so resume never answered it",
    "accepts them": "load_checkpoint returned a file it should have refused with a CheckpointError",
    "refuses or alters it": "load_checkpoint failed on, or changed, a correct version-1 file",
    "save failed": "save_checkpoint raised, or wrote nowhere, before any resume could start",
}


def fields_column(title: str, folder: Path, level: Any, seed: int = 0) -> Column:
    """Level 1's column: each check of :mod:`grader.levels.fields`, ok or what went wrong on resume."""
    from grader.levels import fields as resume_driver

    filename = level.files[0]
    path = Path(folder) / filename
    if not path.is_file():
        return failed_column(title, f"there is no {filename} in {folder}")
    try:
        module = load_module(path)
    except loader.ImportProblem as exc:
        return failed_column(title, str(exc))
    problems = resume_driver.level1_verdict(module, seed)
    col = Column(title, problems=problems, kind="fields")
    for check_id in resume_driver.LEVEL1_CHECKS:
        label, short = FIELD_ROWS.get(check_id, (check_id, "fails"))
        key = ("field", 0, check_id)
        col.labels[key] = (label, "")
        message = problems.get(check_id)
        if message is None:
            col.cells[key] = [OK]
        elif "could not be set up" in message or "no checkpoint.json in the folder" in message:
            col.cells[key] = ["save failed"]
        else:
            col.cells[key] = [short]
    return col


# --- level 4: crash a correct run at every point, then resume with the learner's code ------------

RESUME_WORDS = {"REFUSE": "trusted a bad file", "PAIRING": "unanswered tool_use", "ONCE": "effect twice",
                "COUNTS": "counters restart", "RESUME": "wrong ending", "SAVED": "stopped saving", "CAP": "cap broken"}
RESUME_LEGEND = {
    "trusted a bad file": "resume used (or changed) a file it should have refused with CheckpointError (REFUSE)",
    "unanswered tool_use": "the model was sent a tool_use with no tool_result right after it: a 400 (PAIRING)",
    "effect twice": "a non-idempotent tool ran again after the crash (ONCE)",
    "counters restart": "turns or tokensUsed did not carry on from the numbers in the file (COUNTS)",
    "wrong ending": "the resumed run did not end where an uncrashed run ends (RESUME)",
    "stopped saving": "resume ran on without keeping checkpoint.json current (SAVED)",
    "cap broken": "the turn cap did not count the turns from before the crash (CAP)",
    "resume raised": "resume_agent raised an exception that is not CheckpointError",
}


def resume_column(title: str, folder: Path, level: Any, seed: int = 0) -> Column:
    """Level 4's column: a correct run crashed at each point, then resumed with ``resume_agent``.

    The same steps as :func:`grader.levels.resume.explore_resume`, kept per crash point so each
    row of the matrix can say what resume made of the file that crash left.
    """
    import tempfile

    from grader.levels import resume as rx
    from grader.engine.crash_models import crash_states
    from grader.engine.explore import record_run
    from grader.engine.checkpoint import CHECKPOINT_NAME, snapshot, tool_use_blocks
    from grader.engine.scripted import support_tickets

    filename = level.files[0]
    path = Path(folder) / filename
    if not path.is_file():
        return failed_column(title, f"there is no {filename} in {folder}")
    try:
        module = load_module(path)
    except loader.ImportProblem as exc:
        return failed_column(title, str(exc))
    resume = getattr(module, level.function, None)
    error = getattr(module, "CheckpointError", None)
    if not callable(resume) or not (isinstance(error, type) and issubclass(error, Exception)):
        return failed_column(title, f"{filename} needs `{level.function}` and `class CheckpointError(Exception)`")
    scenario = support_tickets(seed)
    with tempfile.TemporaryDirectory(prefix="crashcourse-crashed-") as work:
        work = os.path.realpath(work)
        recorder, returned, err, _ = record_run(rx.reference_writer, scenario, work, "checkpoints")
    if err is not None:
        return failed_column(title, f"the crashed run failed (a grader problem): {err}")
    ops, final = recorder.ops, snapshot(returned)
    windows = windows_for(ops, scenario.task)
    blocks = [b for r in scenario.responses for b in tool_use_blocks(r.get("content"))]
    starts, received = [0], [0]
    for op in ops:
        starts.append(starts[-1] + (op.kind == "tool_start"))
        received.append(received[-1] + (op.kind == "model_end"))
    col = Column(title, kind="resume")
    seen: dict = {}
    for state in crash_states(ops, recorder.initial, os.path.join(work, "checkpoints"), CHECKPOINT_NAME, ("M1",),
                              recorder.initial_dirs):
        raw = state.read(CHECKPOINT_NAME)
        started = starts[state.point]
        key = (raw, tuple(sorted(n for n in state.files if n != CHECKPOINT_NAME)), started, received[state.point])
        if key not in seen:
            carried = [(b["id"], b["name"], b["input"]) for b in blocks[:started]]
            outcome = rx.run_resume(resume, scenario, dict(state.files), carried, checkpoint_error=error,
                                    received=received[state.point])
            seen[key] = rx.judge_all(outcome, raw, final if raw is not None else None, scenario)
            for check, detail in seen[key]:
                col.problems.setdefault(check, rx.ResumeFailure(
                    check, windows[state.point].words(), state.model, rx._describe_file(raw),
                    rx._describe_outcome(outcome), detail))
        phase_key, phase_words = _phase_label(windows[state.point])
        step = _step(ops[state.point - 1] if state.point else None) if phase_key[0] != "done" else ""
        row = phase_key + (step,)
        col.labels[row] = (phase_words, step)
        cell = col.cells.setdefault(row, [])
        for word in [RESUME_WORDS.get(c, c.lower()) for c, _ in seen[key]] or [OK]:
            if word not in cell:
                cell.append(word)
        col.states += 1
    for cell in col.cells.values():
        if len(cell) > 1 and OK in cell:
            cell.remove(OK)
    return col


BYTE_TURNS = 60


def journal_column(title: str, module: Any, level: Any, seed: int = 0) -> Column:
    """Level 6's column: the level-2 crash rows, read through the learner's loader, plus a bytes row.

    The bytes row runs the loop uncrashed on a 60-turn task and compares what it wrote with the
    size of the conversation (the tests use 200 turns and the same rule; 60 keeps the demo quick).
    """
    import tempfile

    from grader.engine.explore import record_run
    from grader.levels.journal import AMPLIFICATION_LIMIT, FROM_TURN, byte_report, explore_journal, long_conversation
    from grader.engine.scripted import support_tickets

    load = getattr(module, "load_checkpoint", None)
    if not callable(load):
        return failed_column(title, f"{level.files[0]} has no function `load_checkpoint`")
    scenario = support_tickets(seed)
    result = explore_journal(module.run_agent, load, scenario, models=tuple(level.crash_models) or ("M1", "M2"))
    col = column(title, result.crashes, scenario.task)  # one call per turn: level 2's rows name the points
    if result.crashes.error:
        return col
    long = long_conversation(BYTE_TURNS, seed=seed)
    with tempfile.TemporaryDirectory(prefix="crashcourse-bytes-") as work:
        recorder, _, error, _ = record_run(module.run_agent, long, work, "checkpoints")
    key = ("note", 0, "BYTES")
    col.labels[key] = (f"bytes written over a {BYTE_TURNS}-turn task, per byte of its history", "")
    if error:
        col.cells[key] = ["loop failed"]
        col.extra_bad.append("BYTES")
        col.extra_explain = f"The {BYTE_TURNS}-turn run did not finish: {error}"
        return col
    report = byte_report(recorder.ops, long)
    turn, worst = report.worst
    ratio = report.amplification(report.turns)
    if worst <= AMPLIFICATION_LIMIT:
        col.cells[key] = [f"ok ({ratio:.1f}x)"]
    else:
        col.cells[key] = [f"bytes grow ({ratio:.0f}x)"]
        col.extra_bad.append("BYTES")
        col.extra_explain = report.explain() + (f"\n  (Measured here over {BYTE_TURNS} turns; the limit applies "
                                                f"from turn {FROM_TURN} on.)")
    return col


def models_line(level: Any) -> str:
    return "; ".join(f"{m} {MODEL_NAMES.get(m, m)}" for m in level.crash_models)


def terminal_width() -> int:
    return min(WIDTH, max(60, shutil.get_terminal_size((WIDTH, 24)).columns))
