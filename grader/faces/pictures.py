"""Pictures of where crashes land: crash points along the loop, one row per implementation.

:func:`crash_matrix` runs each loop once under the recorder, rebuilds every crash state the trace
allows (:func:`grader.engine.crash_models.crash_states`), checks each one against what the loop had done
by then (:func:`grader.engine.invariants.check`, the same check the grader makes), and files the verdict
under the loop position the crash fell in: the first model call, then for every turn save point A,
the tool running, save point B and the next model call, then the final save. :func:`draw_crash_matrix`
draws the result, one stripe per crash state, coloured by what a resume would find there.

The computing half needs only the standard library, so the kit's tests can check a matrix without
matplotlib; drawing imports matplotlib when it is asked to draw.
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
        # Shade the stretches where a save is in progress, letter them, and label each turn once
        # (horizontal, under its middle), so the axis stays readable at twelve turns.
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
        ax.set_xlim(-0.5, max(len(ordered), 1) - 0.5)
        ax.set_ylabel("KiB on disk", fontsize=8.5)
        ax.set_title(row.name, fontsize=10, loc="left")
        for k in OUTCOMES:
            if k not in used_all and any(v.outcome == k for _, v in ordered):
                used_all.append(k)
    handles = [Line2D([], [], color="#333333", label=CHECKPOINT_NAME)]
    handles += [Line2D([], [], color="#888888", linestyle="--", label=_wrap_label(n, 24))
                for n in names_all if n != CHECKPOINT_NAME]
    handles += [Line2D([], [], marker="o", linestyle="", color=OUTCOMES[k][1],
                       label=f"crash here: {OUTCOMES[k][0]}") for k in used_all]
    handles.append(Patch(facecolor=SAVE_BAND, label="grey band: a save being written (A, B, F = final)"))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(3, len(handles)), fontsize=7.5, frameon=False)
    fig.suptitle(title or "What the checkpoint folder holds at each crash point (process killed, M1)", fontsize=11)
    return fig
