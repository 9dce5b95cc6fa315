"""Pictures of where crashes land: crash points along the loop, one row per implementation.

:func:`crash_matrix` runs each loop once under the recorder, rebuilds every crash state the trace
allows (:func:`grader.engine.crash_models.crash_states`), checks each one against what the loop had done
by then (:func:`grader.engine.invariants.check`, the same check the grader makes), and files the verdict
under the loop position the crash fell in: the first model call, then for every turn save point A,
the tool running, save point B and the next model call, then the final save. :func:`draw_crash_matrix`
draws the result, one stripe per crash state, coloured by what a resume would find there.

The computing half needs only the standard library, so the kit's tests can check a matrix without
matplotlib; drawing imports matplotlib when it is asked to draw.

The same module draws the lesson's four pictures (:data:`LESSON_PICTURES`, at the end of this file):
``python -m grader.faces.pictures --lesson`` writes them to ``lessons/pictures/``.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

from grader.engine import crash_models
from grader.engine.explore import POWER_MODELS, Exploration, Violation, check_trace, record_run, windows_for
from grader.engine.invariants import Finding, Window, check
from grader.engine.checkpoint import CHECKPOINT_NAME, tool_use_blocks
from grader.engine.recorder import Op
from grader.engine.scripted import Scenario, support_tickets
from grader.levels import registry

# What a resume finds, from best to worst as a learner meets them. Each entry: label, colour,
# and one sentence on what it means for the run that picks up the file.
OUTCOMES = registry.PICTURE_OUTCOMES  # key -> (label, colour, meaning), declared with the checks
# Which outcome a cell shows first when its crash states disagree: the worst one.
SEVERITY = ("torn", "untraced", "stale", "counters", "older", "other", "ok")

PHASE_LABELS = {
    "start": "first\nmodel call",
    "A": "save\npoint A",
    "tool": "tool\nruns",
    "B": "save\npoint B",
    "model": "model\ncall",
    "final": "final\nsave",
    "done": "after\nreturn",
}

Loop = Callable[..., Any]


@dataclass
class Verdict:
    """One crash state and what a resume would find in it."""

    point: int
    model: str
    outcome: str                     # a key of OUTCOMES
    where: str                       # the crash point in the loop's words
    operation: str                   # the operation the crash fell after (or in the middle of)
    files: dict                      # the checkpoint directory: name -> bytes
    finding: Optional[Finding] = None

    def violation(self) -> Violation:
        """The grader's full message for this crash state (only for a state that is not ok)."""
        if self.finding is None:
            raise ValueError("this crash state is fine; there is nothing to explain")
        invariant, detail = self.finding.invariant, self.finding.detail
        if self.model in POWER_MODELS:
            # As the grader words it: after a power cut the broken rule is durability.
            invariant, detail = "DURABLE", f"{invariant}: {detail}"
        return Violation(invariant, self.model, self.point, self.where, self.operation,
                         dict(self.files), detail, self.finding.resume)


@dataclass
class Column:
    """One loop position: ``key`` is ("start",), (turn, phase), ("final",) or ("done",)."""

    key: tuple
    label: str
    turn: int = 0
    tool: str = ""


@dataclass
class Row:
    """One implementation's verdicts, by column key, in trace order within each column."""

    name: str
    cells: dict = field(default_factory=dict)
    error: Optional[str] = None
    unseen: list = field(default_factory=list)
    exploration: Optional[Exploration] = None

    @property
    def verdicts(self) -> list[Verdict]:
        return [v for cell in self.cells.values() for v in cell]

    @property
    def ok(self) -> bool:
        return self.error is None and not self.unseen and all(v.outcome == "ok" for v in self.verdicts)

    def outcome(self, key: tuple) -> Optional[str]:
        """The worst outcome in one cell (None if this loop has no crash point there)."""
        cell = self.cells.get(key)
        if not cell:
            return None
        present = {v.outcome for v in cell}
        return next(o for o in SEVERITY if o in present)

    def first_bad(self, key: Optional[tuple] = None) -> Optional[Verdict]:
        cells = [self.cells.get(key, [])] if key is not None else list(self.cells.values())
        return next((v for cell in cells for v in cell if v.outcome != "ok"), None)


@dataclass
class CrashMatrix:
    """Crash points along the loop (columns) against implementations (rows)."""

    scenario: str
    models: tuple
    columns: list
    rows: list

    @property
    def ok(self) -> bool:
        return all(row.ok for row in self.rows)

    def row(self, name: str) -> Row:
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(f"no row named {name!r}; the rows are {[r.name for r in self.rows]}")

    def column(self, wanted: Union[str, tuple]) -> Column:
        """A column by key, or by its words: "turn 2 B", "turn 1 tool", "start", "final"."""
        for col in self.columns:
            if col.key == wanted or _column_words(col) == wanted:
                return col
        raise KeyError(f"no column {wanted!r}; try one of {[_column_words(c) for c in self.columns]}")

    def failing_cells(self) -> list[tuple[str, str, str, int, int]]:
        """Every cell that is not all ok: (row, column words, worst outcome, bad states, states)."""
        out = []
        for row in self.rows:
            for col in self.columns:
                cell = row.cells.get(col.key, [])
                bad = sum(v.outcome != "ok" for v in cell)
                if bad:
                    out.append((row.name, _column_words(col), row.outcome(col.key), bad, len(cell)))
        return out

    def outcomes(self) -> dict[str, list[Optional[str]]]:
        """Row name -> the worst outcome of each column, in column order (None: no crash point there)."""
        return {row.name: [row.outcome(col.key) for col in self.columns] for row in self.rows}

    def explain(self, row: str, column: Union[str, tuple, None] = None) -> str:
        """What the grader would say about the first bad crash state in one cell (or one row)."""
        r = self.row(row)
        if r.error:
            return f"{row}: the loop did not finish, so no crash state could be checked:\n{r.error}"
        if r.unseen:
            return f"{row}: the recorder could not see every write: " + "; ".join(r.unseen[:3])
        key = self.column(column).key if column is not None else None
        bad = r.first_bad(key)
        if bad is None:
            where = f" at {_column_words(self.column(column))}" if column is not None else ""
            return f"{row}: every crash state{where} leaves a file resume can use."
        return bad.violation().explain()


def _column_words(col: Column) -> str:
    if col.key in (("start",), ("final",), ("done",)):
        return col.key[0]
    return f"turn {col.key[0]} {col.key[1]}"


def column_key(window: Window) -> tuple:
    """The loop position a crash window belongs to."""
    if window.phase == "before-first-response":
        return ("start",)
    if window.phase in ("final", "done"):
        return (window.phase,)
    return (window.turn, window.phase)


def _sort_key(key: tuple) -> tuple:
    if key == ("start",):
        return (0, 0, 0)
    if key == ("final",):
        return (2, 0, 0)
    if key == ("done",):
        return (3, 0, 0)
    return (1, key[0], ("A", "tool", "B", "model").index(key[1]))


def classify(finding: Optional[Finding], raw: Optional[bytes]) -> str:
    """Sort a finding of :func:`grader.engine.invariants.check` into one of :data:`OUTCOMES`."""
    if finding is None:
        return "ok"
    kind = finding.invariant
    declared = registry.check("loop", kind)
    if declared is not None and declared.picture:
        return declared.picture
    if kind == "PAIRING":
        # Stale when a call is still marked pending although the conversation already moved past it.
        data = json.loads(raw) if raw else {}
        messages = data.get("messages") or []
        last = messages[-1] if messages else {}
        asks = last.get("role") == "assistant" and tool_use_blocks(last.get("content"))
        return "stale" if data.get("pendingToolUse") is not None and not asks else "other"
    if kind == "WHOLE" and "older" in finding.detail:
        return "older"
    return "other"


def _operation_words(ops: list[Op], state: crash_models.CrashState) -> str:
    if state.torn is not None:
        return f"in the middle of {ops[state.point].describe()} ({state.torn[0]} of {state.torn[1]} bytes landed)"
    return "before anything happened" if state.point == 0 else "after " + ops[state.point - 1].describe()


def loop_row(name: str, run: Loop, scenario: Scenario, models: Sequence[str] = ("M1", "M2"),
             directory: str = "checkpoints", timeout: Optional[float] = 20) -> Row:
    """Run ``run`` once on ``scenario`` and sort every crash state's verdict into its loop position."""
    models = tuple(models)
    row = Row(name)
    with tempfile.TemporaryDirectory(prefix="crashcourse-picture-") as workdir:
        workdir = os.path.realpath(workdir)
        recorder, returned, error, _ = record_run(run, scenario, workdir, directory, timeout=timeout)
        ckpt_dir = os.path.join(workdir, directory)
        exploration = Exploration(scenario.name, models, ops=recorder.ops, error=error, returned=returned,
                                  unseen=list(dict.fromkeys(recorder.unseen)))
        if error is None:
            # The engine's own pass: it also catches what is not a crash state (a temp file kept in
            # another directory, a returned state that differs, a checkpoint never written).
            check_trace(exploration, recorder, ckpt_dir, scenario, max_violations=10 ** 9)
        row.exploration, row.error, row.unseen = exploration, exploration.error, exploration.unseen
        if row.error is not None:
            return row
        ops = recorder.ops
        windows = windows_for(ops, scenario.task)
        for key in dict.fromkeys(column_key(w) for w in windows):  # in loop order, so "first" means first
            row.cells[key] = []
        for state in crash_models.crash_states(ops, recorder.initial, ckpt_dir, CHECKPOINT_NAME, models,
                                               recorder.initial_dirs, tear_only=(CHECKPOINT_NAME,)):
            window = windows[state.point]
            raw = state.read(CHECKPOINT_NAME)
            finding = check(raw, window)
            row.cells[column_key(window)].append(Verdict(
                state.point, state.model, classify(finding, raw), window.words(), _operation_words(ops, state),
                dict(state.files), finding))
        for v in exploration.violations:
            if v.invariant == "ATOMIC-DIR" or v.model == "none":
                # Not a crash state of its own: mark the position where it happened.
                key = column_key(windows[min(v.point, len(windows) - 1)])
                row.cells[key].append(Verdict(v.point, v.model, "other", v.where, v.operation, v.files,
                                              Finding(v.invariant, v.detail, v.resume)))
    return row


def crash_matrix(loops: Union[Mapping[str, Loop], Iterable[tuple[str, Loop]]], scenario: Optional[Scenario] = None,
                 models: Sequence[str] = ("M1", "M2"), directory: str = "checkpoints") -> CrashMatrix:
    """Crash every loop in ``loops`` (name -> ``run_agent``) at every point of ``scenario``.

    The scenario defaults to the course's task, :func:`grader.engine.scripted.support_tickets` with seed 0.
    """
    scenario = scenario if scenario is not None else support_tickets(0)
    items = list(loops.items()) if isinstance(loops, Mapping) else list(loops)
    rows = [loop_row(name, run, scenario, models, directory) for name, run in items]
    keys = sorted({key for row in rows for key in row.cells}, key=_sort_key)
    tools = [tool_use_blocks(r.get("content"))[0]["name"] for r in scenario.responses if tool_use_blocks(r.get("content"))]
    columns = []
    for key in keys:
        if len(key) == 2:
            columns.append(Column(key, PHASE_LABELS[key[1]], key[0], tools[key[0] - 1] if key[0] <= len(tools) else ""))
        else:
            columns.append(Column(key, PHASE_LABELS[key[0]]))
    return CrashMatrix(scenario.name, tuple(models), columns, rows)


def _box(x: float, y: float, w: float, h: float) -> list:
    return [(x, y), (x + w, y), (x + w, y + h), (x, y + h)]


# A notebook's output area is about 10 inches wide at matplotlib's default 100 dpi: a picture wider
# than that is shrunk until its labels cannot be read, so long runs wrap onto several bands instead.
MAX_WIDTH = 10.0
TURNS_PER_BAND = 4
POWER_HATCH = "////"
SAVE_BAND = "#e6e6e6"


def _bands(columns: list) -> list[list[int]]:
    """Column indexes cut into bands of at most TURNS_PER_BAND turns (start, final and done ride along)."""
    bands: list[list[int]] = [[]]
    turns_in_band: set = set()
    for i, col in enumerate(columns):
        if col.turn and col.turn not in turns_in_band and len(turns_in_band) == TURNS_PER_BAND:
            bands.append([])
            turns_in_band = set()
        if col.turn:
            turns_in_band.add(col.turn)
        bands[-1].append(i)
    return bands


def _legend_handles(used: set, power: bool) -> list:
    from matplotlib.patches import Patch

    shown = [k for k in OUTCOMES if k != "other" or "other" in used]
    handles = [Patch(facecolor=OUTCOMES[k][1], label=OUTCOMES[k][0]) for k in shown]
    if power:
        handles.append(Patch(facecolor="white", edgecolor="#333333", hatch=POWER_HATCH,
                             label="hatched: after a power cut (M3-M5)"))
    return handles


def draw_crash_matrix(matrix: CrashMatrix, title: Optional[str] = None, ax: Any = None, counts: bool = True) -> Any:
    """Draw ``matrix``: one row per loop, one column per loop position, one stripe per crash state.

    A run of more than four turns wraps onto several bands, one under the other, so the picture
    stays as wide as a notebook. Stripes of power-cut crash states (M3 to M5) are hatched. Returns
    the matplotlib Figure (a plain Figure, not one pyplot tracks, so a notebook shows it once).
    """
    from matplotlib.figure import Figure

    n_rows = len(matrix.rows)
    power = any(m in POWER_MODELS for m in matrix.models)
    if ax is not None:
        used = _draw_band(ax, matrix, list(range(len(matrix.columns))), counts)
        ax.legend(handles=_legend_handles(used, power), loc="upper center", bbox_to_anchor=(0.5, -0.1),
                  ncol=4, fontsize=8, frameon=False, title="what a resume would find", title_fontsize=8.5)
        models = " and ".join(matrix.models)
        ax.set_title(title or f"Where crashes land ({matrix.scenario}, crash models {models})", fontsize=11)
        return ax.figure
    bands = _bands(matrix.columns)
    widest = max(len(b) for b in bands)
    width = min(MAX_WIDTH, max(6.0, 0.55 * widest + 2.6))
    band_height = 1.25 + 0.5 * n_rows
    fig = Figure(figsize=(width, band_height * len(bands) + 1.5), layout="constrained")
    fig.get_layout_engine().set(w_pad=0.08, h_pad=0.12)
    axes = fig.subplots(len(bands), 1, squeeze=False)[:, 0]
    used: set = set()
    for band_ax, band in zip(axes, bands):
        used |= _draw_band(band_ax, matrix, band, counts, pad_to=widest)
    handles = _legend_handles(used, power)
    fig.legend(handles=handles, loc="outside lower center", ncol=min(4, len(handles)), fontsize=8, frameon=False,
               title="what a resume would find", title_fontsize=8.5)
    models = " and ".join(matrix.models)
    fig.suptitle(title or f"Where crashes land ({matrix.scenario}, crash models {models})", fontsize=11)
    return fig


def _draw_band(ax: Any, matrix: CrashMatrix, band: list[int], counts: bool, pad_to: int = 0) -> set:
    """Draw the columns ``band`` of ``matrix`` on ``ax``; return the outcomes it used."""
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Rectangle

    n_rows, n_cols = len(matrix.rows), len(band)
    ax.set_xlim(0, max(n_cols, pad_to))
    ax.set_ylim(n_rows, -0.9)
    used: set = set()
    # Every stripe goes into one collection: hundreds of separate patches would take seconds to draw.
    stripes, colours, hatched, frames = [], [], [], []
    for r, row in enumerate(matrix.rows):
        if row.error or row.unseen:
            ax.add_patch(Rectangle((0.02, r + 0.1), n_cols - 0.04, 0.8, facecolor="#eeeeee", edgecolor="#999999",
                                   hatch="//"))
            why = "the loop did not finish" if row.error else "the recorder could not see every write"
            ax.text(n_cols / 2, r + 0.5, why + " (see the printed report)", ha="center", va="center", fontsize=9)
            continue
        for c, index in enumerate(band):
            col = matrix.columns[index]
            cell = row.cells.get(col.key, [])
            x0, y0, w, h = c + 0.05, r + 0.1, 0.9, 0.8
            frames.append(_box(x0, y0, w, h))
            if not cell:
                continue
            step = w / len(cell)
            for i, verdict in enumerate(cell):
                used.add(verdict.outcome)
                stripes.append(_box(x0 + i * step, y0, step, h))
                colours.append(OUTCOMES[verdict.outcome][1])
                if verdict.model in POWER_MODELS:
                    hatched.append(_box(x0 + i * step, y0, step, h))
            bad = sum(v.outcome != "ok" for v in cell)
            if counts and bad:
                ax.text(c + 0.5, r + 0.5, f"{bad}/{len(cell)}", ha="center", va="center", fontsize=7, zorder=4,
                        color="#222222", bbox=dict(boxstyle="round,pad=0.15", facecolor="white", alpha=0.85,
                                                   edgecolor="none"))
    ax.add_collection(PolyCollection(stripes, facecolors=colours, edgecolors="none", zorder=1), autolim=False)
    if hatched:
        ax.add_collection(PolyCollection(hatched, facecolors="none", edgecolors="#00000055", linewidths=0,
                                         hatch=POWER_HATCH, zorder=2), autolim=False)
    ax.add_collection(PolyCollection(frames, facecolors="none", edgecolors="#444444", linewidths=0.6, zorder=3),
                      autolim=False)
    ax.set_yticks([r + 0.5 for r in range(n_rows)], [row.name for row in matrix.rows], fontsize=8.5)
    ax.set_xticks([c + 0.5 for c in range(n_cols)], [matrix.columns[i].label for i in band], fontsize=7)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    # Group the four positions of each turn under one heading: "turn 2: classify_tickets".
    turns: dict = {}
    for c, index in enumerate(band):
        col = matrix.columns[index]
        if col.turn:
            turns.setdefault(col.turn, [c, c, col.tool])[1] = c
    for turn, (first, last, tool) in turns.items():
        ax.text((first + last + 1) / 2, -0.35, f"turn {turn}: {tool}" if tool else f"turn {turn}", ha="center",
                va="center", fontsize=8, clip_on=True)
        ax.plot([first + 0.1, last + 0.9], [-0.12, -0.12], color="#666666", linewidth=0.8)
    return used


def _wrap_label(text: str, width: int = 9) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width)) or text


def _save_bands_and_turns(ax: Any, matrix: CrashMatrix, ordered: list) -> None:
    """Shade and letter the stretches of ``ordered`` crash points where a save is being written, and
    label each turn once on the x axis."""
    # Each turn is labelled once, horizontal, under its middle, so the axis stays readable at twelve turns.
    spans: dict = {}
    start = 0
    for col in matrix.columns:
        n = sum(1 for c, _ in ordered if c is col)
        if not n:
            continue
        if col.key[-1] in ("A", "B", "final"):
            ax.axvspan(start - 0.5, start + n - 0.5, color=SAVE_BAND, zorder=0, linewidth=0)
            letter = "F" if col.key[-1] == "final" else col.key[-1]
            ax.text(start + (n - 1) / 2, 0.98, letter, transform=ax.get_xaxis_transform(), ha="center",
                    va="top", fontsize=6.5, color="#555555")
        group = f"turn {col.turn}" if col.turn else {"start": "start", "final": "end", "done": "end"}[col.key[0]]
        spans.setdefault(group, [start, start + n - 1])[1] = start + n - 1
        start += n
    ticks = [(a + b) / 2 for a, b in spans.values()]
    many = len(spans) > 8
    labels = [g.replace("turn ", "") if many and g.startswith("turn") else g for g in spans]
    ax.set_xticks(ticks, labels, rotation=0, fontsize=7.5)
    ax.set_xlabel("turn" if many else "", fontsize=8)


def _draw_sizes_panel(ax: Any, matrix: CrashMatrix, row: Any, used_all: list, names_all: list) -> None:
    """One row's panel of :func:`draw_file_sizes`; adds the file names and outcomes it shows to
    ``names_all`` and ``used_all`` (for the shared legend)."""
    ordered = []
    for col in matrix.columns:
        ordered += [(col, v) for v in row.cells.get(col.key, []) if v.model == "M1"]
    names = sorted({n for _, v in ordered for n in v.files})
    xs = range(len(ordered))
    for name in names:
        sizes = [len(v.files[name]) / 1024 if name in v.files else float("nan") for _, v in ordered]
        style = dict(color="#333333", linewidth=1.4) if name == CHECKPOINT_NAME else \
            dict(color="#888888", linewidth=1.0, linestyle="--")
        ax.step(xs, sizes, where="mid", label=name, **style)
        if name not in names_all:
            names_all.append(name)
    sizes = [len(v.files[CHECKPOINT_NAME]) / 1024 if CHECKPOINT_NAME in v.files else 0 for _, v in ordered]
    ax.scatter(xs, sizes, c=[OUTCOMES[v.outcome][1] for _, v in ordered], s=24, zorder=3,
               edgecolors="white", linewidths=0.5)
    _save_bands_and_turns(ax, matrix, ordered)
    ax.set_xlim(-0.5, max(len(ordered), 1) - 0.5)
    ax.set_ylabel("KiB on disk", fontsize=8.5)
    ax.set_title(row.name, fontsize=10, loc="left")
    for k in OUTCOMES:
        if k not in used_all and any(v.outcome == k for _, v in ordered):
            used_all.append(k)


def draw_file_sizes(matrix: CrashMatrix, rows: Optional[Sequence[str]] = None, title: Optional[str] = None) -> Any:
    """For each chosen row, the size of every file in the checkpoint folder at each crash point (M1).

    One panel per row; the x axis is the crash points in trace order, one label per turn; each
    checkpoint.json marker is coloured by what a resume would find there; grey bands are the
    stretches where a save is being written (save points A and B, the final save), each marked with
    its letter, and the legend says so.
    """
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    chosen = [matrix.row(name) for name in rows] if rows is not None else list(matrix.rows)
    fig = Figure(figsize=(MAX_WIDTH, 2.7 * len(chosen) + 1.0), layout="constrained")
    axes = fig.subplots(len(chosen), 1, squeeze=False)[:, 0]
    used_all: list = []
    names_all: list = []
    for ax, row in zip(axes, chosen):
        _draw_sizes_panel(ax, matrix, row, used_all, names_all)
    handles = [Line2D([], [], color="#333333", label=CHECKPOINT_NAME)]
    handles += [Line2D([], [], color="#888888", linestyle="--", label=_wrap_label(n, 24))
                for n in names_all if n != CHECKPOINT_NAME]
    handles += [Line2D([], [], marker="o", linestyle="", color=OUTCOMES[k][1],
                       label=f"crash here: {OUTCOMES[k][0]}") for k in used_all]
    handles.append(Patch(facecolor=SAVE_BAND, label="grey band: a save being written (A, B, F = final)"))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(3, len(handles)), fontsize=7.5, frameon=False)
    fig.suptitle(title or "What the checkpoint folder holds at each crash point (process killed, M1)", fontsize=11)
    return fig


# -- pictures for the lesson -------------------------------------------------------------------------
#
# Four pictures in lessons/02-checkpoints.md, drawn here so the lesson and the notebook share one
# drawing module. Where a picture states a fact about crashes (what the file says after a crash in
# each stretch of a turn, which save survives which crash) the fact is computed by crashing real
# loops, not typed in. ``python -m grader.faces.pictures --lesson`` rewrites them;
# tests/test_lesson_pictures.py fails when a committed picture differs from what this code draws.

LESSON_PICTURES = ("six-fields", "turn-timeline", "byte-layers", "save-methods")
KILLED_MODELS = ("M1", "M2")


def _save_in_place(state: dict, directory: str) -> None:
    """Overwrite checkpoint.json where it is: what the lesson's section 4 starts from."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, CHECKPOINT_NAME), "w", encoding="utf-8") as f:
        json.dump(state, f)


def _save_temp_then_rename(state: dict, directory: str) -> None:
    """The lesson's save: a temp file beside the checkpoint, closed, then os.replace (level 2)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, CHECKPOINT_NAME)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(state, f)
    os.replace(path + ".tmp", path)


def _fsync_folder(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _save_durable(state: dict, directory: str) -> None:
    """The deeper page's save: flush and fsync the temp file, rename, fsync the folder (level 3)."""
    if not os.path.isdir(directory):
        os.makedirs(directory)
        _fsync_folder(os.path.dirname(os.path.abspath(directory)))
    path = os.path.join(directory, CHECKPOINT_NAME)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)
    _fsync_folder(directory)


# The save methods the lesson's table compares: (row label, save function).
SAVE_METHODS = (
    ('open(path, "w"), write in place', _save_in_place),
    ("temp file, close, os.replace  (level 2)", _save_temp_then_rename),
    ("temp file, flush, fsync, os.replace,\nfsync the folder  (level 3)", _save_durable),
)


def lesson_loop(save: Callable[[dict, str], None], points: str = "AB") -> Loop:
    """The lesson's loop (``run_agent``'s signature) calling ``save`` at the save points in ``points``
    ("AB", or "B" for a loop that skips save point A); the final save always happens."""
    from grader.engine.checkpoint import run_reference

    def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
        def at(state: dict, label: str) -> None:
            if label == "final" or label in points:
                save(state, directory)
        return run_reference(task, tools, call_model, execute_tool, at)

    return run_agent


@dataclass
class MethodCell:
    """One save method under one crash model: how many crash states, and what the bad ones found."""

    model: str
    states: int
    bad: int
    outcome: str          # the worst outcome (a key of OUTCOMES)
    counts: dict = field(default_factory=dict)   # bad outcome -> how many crash states found it, most first


def save_method_verdicts(scenario: Optional[Scenario] = None,
                         models: Sequence[str] = ("M1", "M2", "M3", "M4", "M5")) -> dict:
    """``{row label: [MethodCell per model]}``: every save method of :data:`SAVE_METHODS`, in the
    lesson's loop, crashed at every point of ``scenario`` under each crash model."""
    scenario = scenario if scenario is not None else support_tickets(0)
    out = {}
    for label, save in SAVE_METHODS:
        row = loop_row(label, lesson_loop(save), scenario, models)
        if row.error is not None:
            raise RuntimeError(f"{label}: the loop did not run: {row.error}")
        cells = []
        for model in models:
            verdicts = [v for v in row.verdicts if v.model == model]
            present = {v.outcome for v in verdicts}
            worst = next((o for o in SEVERITY if o in present), "ok")
            counts: dict = {}
            for v in verdicts:
                if v.outcome != "ok":
                    counts[v.outcome] = counts.get(v.outcome, 0) + 1
            counts = dict(sorted(counts.items(), key=lambda kv: (-kv[1], SEVERITY.index(kv[0]))))
            cells.append(MethodCell(model, len(verdicts), sum(counts.values()), worst, counts))
        out[label] = cells
    return out


def _file_words(raw: Optional[bytes]) -> str:
    """What a resume reads in one checkpoint.json, in a few words."""
    if raw is None:
        return "no file"
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return "torn file"
    pending = data.get("pendingToolUse")
    return f"turns: {data.get('turns')}\npending: " + (pending["name"] if isinstance(pending, dict) else "none")


@dataclass
class Stretch:
    """One stretch of a turn on the timeline, and what checkpoint.json says after a crash in it."""

    key: tuple            # the crash-matrix column
    label: str
    files: dict           # row name -> the distinct file contents in trace order, in words
    outcomes: dict        # row name -> the worst outcome there (None: that loop does nothing here)


TIMELINE_ROWS = (("save points A and B", "AB"), ("save point B only", "B"))


def turn_timeline(turn: int = 2, scenario: Optional[Scenario] = None) -> list:
    """The stretches around turn ``turn`` of ``scenario``: the model call that names the turn's tool,
    save point A, the tool running, save point B, and the next model call, each with the files a
    crash there leaves (process killed, M1), for a loop with both save points and one with B only."""
    scenario = scenario if scenario is not None else support_tickets(0)
    matrix = crash_matrix([(name, lesson_loop(_save_temp_then_rename, points)) for name, points in TIMELINE_ROWS],
                          scenario, models=("M1",))
    keys = [(turn - 1, "model") if turn > 1 else ("start",), (turn, "A"), (turn, "tool"), (turn, "B"), (turn, "model")]
    tool = next(c.tool for c in matrix.columns if c.turn == turn)
    labels = (f"model call; the reply\nasks for {tool}", "save point A\nbeing written", f"{tool}\nruns",
              "save point B\nbeing written", "next\nmodel call")
    stretches = []
    for key, label in zip(keys, labels):
        files, outcomes = {}, {}
        for row in matrix.rows:
            cell = row.cells.get(key, [])
            files[row.name] = list(dict.fromkeys(_file_words(v.files.get(CHECKPOINT_NAME)) for v in cell))
            outcomes[row.name] = row.outcome(key)
        stretches.append(Stretch(key, label, files, outcomes))
    return stretches


def field_rows() -> list:
    """The six fields as the lesson's table draws them: name, type, who reads it, what breaks without it.

    Names and types come from the protocol (:mod:`grader.engine.checkpoint`); what breaks is the
    legend of level 1's check for that field, as a failing test reports it."""
    from grader.engine.checkpoint import FIELD_TYPES, FIELDS

    readers = {
        "version": "load_checkpoint, before any other field",
        "task": "resume, to tell the user what it continues",
        "turns": "a turn cap (\"give up after 20 turns\")",
        "tokensUsed": "a spend budget, a cost report",
        "messages": "the model, on every call after resume",
        "pendingToolUse": "resume, before it calls the model",
    }
    rows = []
    for name in FIELDS:
        kind = FIELD_TYPES[name]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        type_words = " or ".join("None" if k is type(None) else k.__name__ for k in kinds)
        if name == "version":
            type_words += ", always 1"
        if name == "pendingToolUse":
            type_words = "None, or\n{id, name, input}"
        checked = registry.check("fields", name)
        breaks = checked.legend[0][1] if checked is not None and checked.legend else ""
        rows.append((name, type_words, readers[name], breaks))
    return rows


# The layers between json.dump and the disk, top to bottom: (name, where it lives).
BYTE_LAYERS = (
    ("Python's buffer", "inside your process (io)"),
    ("the OS's page cache", "the kernel's memory"),
    ("the drive's write cache", "memory inside the drive"),
    ("the disk itself", "stable storage"),
)
# What moves a byte down from one layer to the next: (from layer, calls, note).
BYTE_MOVES = (
    (0, "f.flush(), or leaving the with block (close)", "every byte reaches the OS"),
    (1, "os.fsync(fd)", "Linux: on to the disk, and the drive is told to empty its cache;\n"
                        "macOS: only as far as the drive's cache"),
    (2, "fcntl.fcntl(fd, fcntl.F_FULLFSYNC)  (macOS)", "asks the drive to write its cache to the disk"),
)

MODEL_SHORT = {
    "M1": "killed between\ntwo operations",
    "M2": "killed in the\nmiddle of a write",
    "M3": "power cut:\nunsynced data lost",
    "M4": "power cut: writes\nland out of order",
    "M5": "power cut: folder\nnot synced",
}
INK = "#222222"
MUTED = "#666666"


def _light(colour: str, amount: float = 0.78) -> tuple:
    """``colour`` mixed with white: a cell background that keeps black text readable."""
    from matplotlib.colors import to_rgb

    return tuple(c + (1 - c) * amount for c in to_rgb(colour))


def _wrap(text: str, width: int) -> str:
    import textwrap

    return "\n".join(line for part in text.split("\n") for line in (textwrap.wrap(part, width) or [""]))


def _canvas(width: float, height: float) -> tuple:
    """A figure of ``width`` x ``height`` inches with one axis in inch units, no frame."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)  # y grows downward, as one reads
    ax.axis("off")
    return fig, ax


def _cell(ax: Any, x: float, y: float, w: float, h: float, face: Any, edge: str = "white", lw: float = 1.5) -> None:
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((x, y), w, h, facecolor=face, edgecolor=edge, linewidth=lw))


def draw_six_fields() -> Any:
    """The six fields as a table: type, who reads the field, and what a resume runs into without it."""
    rows = field_rows()
    cols = (("field", 1.45, 18), ("type", 1.5, 18), ("who reads it", 2.45, 30), ("without it, after a crash", 4.2, 52))
    wrapped = [[_wrap(text, width) for text, (_, _, width) in zip(row, cols)] for row in rows]
    heights = [0.16 + 0.17 * max(t.count("\n") + 1 for t in row) for row in wrapped]
    top, header = 0.55, 0.34
    fig, ax = _canvas(sum(w for _, w, _ in cols) + 0.3, top + header + sum(heights) + 0.15)
    ax.text(0.15, 0.3, "The six fields of checkpoint.json", fontsize=12, weight="bold", color=INK, va="center")
    x = 0.15
    for name, w, _ in cols:
        _cell(ax, x, top, w, header, "#3a3a3a")
        ax.text(x + 0.08, top + header / 2, name, color="white", fontsize=9.5, weight="bold", va="center")
        x += w
    y = top + header
    for i, (row, h) in enumerate(zip(wrapped, heights)):
        x = 0.15
        for j, ((_, w, _), text) in enumerate(zip(cols, row)):
            _cell(ax, x, y, w, h, "#f3f3f3" if i % 2 else "#ffffff", edge="#d0d0d0", lw=0.6)
            style = dict(family="monospace", weight="bold") if j == 0 else {}
            colour = "#b2182b" if j == 3 else INK
            ax.text(x + 0.08, y + h / 2, text, fontsize=9, va="center", color=colour, linespacing=1.3, **style)
            x += w
        y += h
    return fig


def draw_turn_timeline(turn: int = 2) -> Any:
    """One turn on a timeline, and what checkpoint.json says after a kill in each stretch of it,
    for a loop with save points A and B and for one with B only (computed by crashing both)."""
    stretches = turn_timeline(turn)
    n = len(stretches)
    left, col_w, gap = 1.75, 1.62, 0.06
    width = left + n * col_w + 0.2
    row_h, axis_y, rows_y = 1.05, 0.95, 1.6
    fig, ax = _canvas(width, rows_y + row_h * len(TIMELINE_ROWS) + 0.85)
    ax.text(0.15, 0.3, f"What checkpoint.json says if the process is killed during one turn (turn {turn} of "
                       "the course's task)", fontsize=11, weight="bold", color=INK, va="center")
    from matplotlib.patches import FancyArrowPatch

    ax.add_patch(FancyArrowPatch((left, axis_y + 0.32), (left + n * col_w + 0.12, axis_y + 0.32),
                                 arrowstyle="-|>", mutation_scale=14, color=INK, linewidth=1.2))
    ax.text(left + n * col_w + 0.1, axis_y + 0.47, "time", fontsize=8, color=MUTED, ha="right", va="top")
    for i, s in enumerate(stretches):
        x = left + i * col_w
        is_save = s.key[-1] in ("A", "B")
        _cell(ax, x + gap / 2, axis_y - 0.28, col_w - gap, 0.5, SAVE_BAND if is_save else "#ffffff",
              edge="#999999", lw=0.8)
        ax.text(x + col_w / 2, axis_y - 0.03, s.label, fontsize=8.5, ha="center", va="center", color=INK,
                weight="bold" if is_save else "normal", linespacing=1.2)
    ax.text(left, rows_y - 0.17, "after a kill in that stretch, the file on disk says:", fontsize=8, color=MUTED,
            va="center", style="italic")
    used = []
    for r, (name, points) in enumerate(TIMELINE_ROWS):
        y = rows_y + r * row_h
        ax.text(0.15, y + row_h / 2, _wrap(name, 16), fontsize=9.5, weight="bold", color=INK, va="center")
        for i, s in enumerate(stretches):
            x = left + i * col_w
            outcome = s.outcomes[name]
            if outcome is None:
                _cell(ax, x + gap / 2, y + gap / 2, col_w - gap, row_h - gap, "#ffffff", edge="#cccccc", lw=0.6)
                continue
            if outcome not in used:
                used.append(outcome)
            colour = OUTCOMES[outcome][1]
            _cell(ax, x + gap / 2, y + gap / 2, col_w - gap, row_h - gap, _light(colour), edge=colour, lw=1.0)
            words = s.files[name]
            text = words[0] if len(words) == 1 else f"{words[0]}\n\u2193 os.replace \u2193\n{words[-1]}"
            if s.key[-1] in ("A", "B") and s.key[-1] not in points:
                text = "(this loop saves\nnothing here)\n" + text
            ax.text(x + col_w / 2, y + row_h / 2, text, fontsize=8, ha="center", va="center",
                    color=INK, linespacing=1.25)
    y = rows_y + row_h * len(TIMELINE_ROWS) + 0.3
    x = left
    for outcome in [o for o in OUTCOMES if o in used]:
        label, colour, meaning = OUTCOMES[outcome]
        _cell(ax, x, y - 0.09, 0.18, 0.18, _light(colour), edge=colour, lw=1.0)
        ax.text(x + 0.26, y, f"{label}: {meaning}", fontsize=8, va="center", color=INK)
        y += 0.27
    return fig


def draw_byte_layers() -> Any:
    """The layers a byte passes through on its way to the disk, what each call moves, and which
    layers a killed process and a power cut each empty."""
    from matplotlib.patches import FancyArrowPatch

    box_x, box_w, box_h, step, top = 0.3, 2.6, 0.62, 1.2, 0.95
    fig, ax = _canvas(10.0, top + step * (len(BYTE_LAYERS) - 1) + box_h + 0.25)
    ax.text(0.15, 0.3, "Where the bytes of json.dump are, and what moves them down", fontsize=12, weight="bold",
            color=INK, va="center")
    ax.text(box_x, top - 0.2, "json.dump(state, f) writes into the top layer", fontsize=8.5, color=MUTED,
            va="center")
    shades = ("#fde0c5", "#fdf1c5", "#e0ecf4", "#d9f0d3")
    for i, (name, where) in enumerate(BYTE_LAYERS):
        y = top + i * step
        _cell(ax, box_x, y, box_w, box_h, shades[i], edge="#777777", lw=1.0)
        ax.text(box_x + box_w / 2, y + 0.22, name, fontsize=10, weight="bold", ha="center", va="center", color=INK)
        ax.text(box_x + box_w / 2, y + 0.45, where, fontsize=8, ha="center", va="center", color=MUTED)
    for source, calls, note in BYTE_MOVES:
        y0 = top + source * step + box_h
        y1 = top + (source + 1) * step
        ax.add_patch(FancyArrowPatch((box_x + box_w / 2, y0 + 0.03), (box_x + box_w / 2, y1 - 0.03),
                                     arrowstyle="-|>", mutation_scale=13, color=INK, linewidth=1.3))
        lines = note.count("\n") + 1
        ax.text(box_x + box_w / 2 + 0.2, (y0 + y1) / 2 - 0.09 * lines, calls, fontsize=9, family="monospace",
                va="center", color=INK, weight="bold")
        ax.text(box_x + box_w / 2 + 0.2, (y0 + y1) / 2 + 0.05 + 0.04 * (lines - 1), note, fontsize=8,
                va="center", color=MUTED, linespacing=1.2)
    # Brackets on the right: what each kind of crash takes, and what is left.
    marks = ((6.9, 0, 0, "a killed process loses only this:\nthe kernel goes on and writes the rest", "#d7301f"),
             (6.9, 1, 2, "a power cut loses these too", "#8c2d04"),
             (6.9, 3, 3, "survives a power cut", "#2ca25f"))
    for x, first, last, words, colour in marks:
        y0, y1 = top + first * step + 0.04, top + last * step + box_h - 0.04
        ax.plot([x - 0.1, x, x, x - 0.1], [y0, y0, y1, y1], color=colour, linewidth=1.4)
        ax.text(x + 0.12, (y0 + y1) / 2, words, fontsize=8.5, color=colour, va="center", weight="bold",
                linespacing=1.25)
    return fig


def draw_save_methods(verdicts: Optional[dict] = None) -> Any:
    """Each save method of :data:`SAVE_METHODS` crashed at every point of one run, under each crash model."""
    verdicts = verdicts if verdicts is not None else save_method_verdicts()
    models = [c.model for c in next(iter(verdicts.values()))]
    left, col_w, row_h, head = 2.9, 1.38, 0.9, 0.6
    fig, ax = _canvas(left + col_w * len(models) + 0.2, 0.6 + 0.3 + head + row_h * len(verdicts) + 0.95)
    ax.text(0.15, 0.3, "Three ways to save, crashed at every step of one run", fontsize=12, weight="bold",
            color=INK, va="center")
    top = 0.6
    groups = (("the process is killed", [m for m in models if m in KILLED_MODELS]),
              ("the power is cut", [m for m in models if m in POWER_MODELS]))
    x = left
    for words, members in groups:
        if not members:
            continue
        w = col_w * len(members)
        ax.plot([x + 0.08, x + w - 0.08], [top + 0.26, top + 0.26], color=INK, linewidth=1.0)
        ax.text(x + w / 2, top + 0.12, words, fontsize=9.5, weight="bold", ha="center", va="center", color=INK)
        x += w
    for i, model in enumerate(models):
        ax.text(left + (i + 0.5) * col_w, top + 0.32 + head / 2, f"{model}\n{MODEL_SHORT[model]}", fontsize=8,
                ha="center", va="center", color=INK, linespacing=1.2)
    good, bad = OUTCOMES["ok"][1], OUTCOMES["torn"][1]
    for r, (label, cells) in enumerate(verdicts.items()):
        y = top + 0.3 + head + r * row_h
        ax.text(0.15, y + row_h / 2, label, fontsize=8.5, va="center", color=INK, family="monospace",
                linespacing=1.2)
        for i, cell in enumerate(cells):
            x = left + i * col_w
            colour = good if cell.bad == 0 else bad
            _cell(ax, x + 0.03, y + 0.03, col_w - 0.06, row_h - 0.06, _light(colour, 0.72), edge=colour, lw=1.0)
            # The kinds of damage, not their counts: a count moves whenever the engine learns a new
            # crash point, and the picture would then differ from the lesson for no reason a reader sees.
            if cell.states == 0:
                text = "survives\n(nothing is written\nunder the real name)"
            elif cell.bad == 0:
                text = "survives\nevery crash"
            else:
                found = [OUTCOMES[o][0] for o in SEVERITY if o in cell.counts]
                text = "\n".join(found)
            ax.text(x + col_w / 2, y + row_h / 2, text, fontsize=7.2, ha="center", va="center", color=INK,
                    linespacing=1.2)
    y = top + 0.3 + head + row_h * len(verdicts) + 0.25
    for colour, words in ((good, "survives: every crash leaves a whole save that matches what had happened"),
                          (bad, "fails: what a resume finds after some of the crashes: a torn or empty file, a tool "
                                "call the file does not mention, a call still marked pending whose result is "
                                "recorded, counters that disagree, an older save than one that had returned")):
        _cell(ax, left, y - 0.08, 0.16, 0.16, _light(colour, 0.72), edge=colour, lw=1.0)
        ax.text(left + 0.24, y - 0.08, _wrap(words, 95), fontsize=8, va="top", color=INK, linespacing=1.25)
        y += 0.1 + 0.16 * (_wrap(words, 95).count("\n") + 1)
    return fig


LESSON_DRAWINGS = {
    "six-fields": draw_six_fields,
    "turn-timeline": draw_turn_timeline,
    "byte-layers": draw_byte_layers,
    "save-methods": draw_save_methods,
}


def lesson_svg(name: str) -> bytes:
    """The lesson's picture ``name`` as SVG bytes: text kept as text, no date, fixed ids, so the same
    code draws the same file."""
    import io as _io

    import matplotlib

    fig = LESSON_DRAWINGS[name]()
    out = _io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": "crashcourse-lesson", "svg.fonttype": "none",
                                "font.family": "DejaVu Sans", "font.monospace": ["DejaVu Sans Mono"]}):
        fig.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
    return out.getvalue()


def write_lesson_pictures(folder: Optional[str] = None) -> list:
    """Draw every lesson picture into ``folder`` (the lesson's ``pictures/``); return the paths written."""
    from pathlib import Path

    if folder is None:
        lessons = Path(__file__).resolve().parents[2] / "lessons"
        if not lessons.is_dir():  # an installed kit: its lessons are a copy, not the source to redraw
            raise SystemExit("no lessons/ folder beside the grader: run this in a checkout of the kit, or name "
                             "the folder to draw into")
        folder = lessons / "pictures"
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name in LESSON_PICTURES:
        path = folder / f"{name}.svg"
        path.write_bytes(lesson_svg(name))
        written.append(str(path))
    return written


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] != ["--lesson"]:
        sys.exit("usage: python -m grader.faces.pictures --lesson [FOLDER]   (redraw the lesson's pictures)")
    for written in write_lesson_pictures(sys.argv[2] if len(sys.argv) > 2 else None):
        print("wrote", written)
