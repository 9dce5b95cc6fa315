"""A crash-matrix column: what one loop's (or one resume's) crash points hold, in the loop's words.

The level modules fill columns (each in its own way); :mod:`grader.faces.matrix` lays several side
by side and draws them. The model lives here, below the faces, so a level never imports a face.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

from grader.engine import fresh, loader
from grader.engine.crash_models import MODEL_NAMES
from grader.engine.explore import Exploration, Violation, windows_for
from grader.engine.hangs import Hang, LoopTimeout, loop_timeout, time_limit
from grader.engine.invariants import INVARIANTS
from grader.levels import registry

NOWHERE = "—"      # the loop does nothing at this point (no such crash point)
OK = "ok"
STUCK = "stuck"    # the learner's code did not return in time here, so nothing could be checked

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
        check = registry.check("loop", invariant)
        word = (check.cell if check is not None else "") or invariant.lower()
    return f"power cut: {word}" if power else word


# --- one loop's crash points, grouped into rows ----------------------------------------------------

PHASE_WORDS = {"before-first-response": "before the first answer", "final": "final save",
               "done": "after run_agent returned"}

STEP_WORDS = {"mkdir": "after mkdir", "open": "after open", "write": "after write", "flush": "after flush",
              "fsync": "after fsync", "close": "after close", "rename": "after rename", "unlink": "after unlink",
              "truncate": "after truncate", "link": "after link", "rmdir": "after rmdir"}


def with_rerun(text: str, rerun: str) -> str:
    """``text`` and, when there is one, the command that re-runs just the test it came from."""
    return text + (f"\n  Re-run just this test: {rerun}" if rerun else "")


class ColumnMeaning:
    """What a column's cells add up to, said by the level that draws it.

    The faces ask a column whether it failed, which checks it tripped, its one-line summary, and the
    story of the failure a test recorded; the column asks its meaning. This base class reads a
    loop's column (every crash state of one run, :class:`Exploration`); a level with named checks
    uses :class:`NamedChecks`, or a subclass of its own.
    """

    stuck_after = "so no crash state could be checked"
    # What ``check`` says the level's column holds once everything passes ("Level N passes: every test,
    # and ..."), and when the tests pass but the column does not ("Note: the tests pass, but ...").
    passes = "every crash state in the matrix"
    disagrees = "the crash matrix above shows a crash state that breaks a rule"
    legend = "What a resume would find:"  # the heading of the matrix's legend (what each cell word means)

    def failed(self, col: "Column") -> bool:
        e = col.exploration
        return e is None or not e.ok or bool(col.extra_bad)

    def tripped(self, col: "Column") -> set:
        """What broke, by check id (``ERROR`` when there was nothing to check)."""
        if col.exploration is None:
            return {"ERROR"}
        return set(col.exploration.tripped) | set(col.extra_bad)

    def summary(self, col: "Column") -> str:
        e = col.exploration
        if e is None:
            return f"{col.title}: {col.note}"
        if e.error:
            return f"{col.title}: the loop did not finish even without a crash"
        if e.unseen:
            return f"{col.title}: wrote files in a way the grader cannot see"
        extra = f"; {', '.join(col.extra_bad)} broken" if col.extra_bad else ""
        where = f" at {e.points} crash points" if e.points else ""
        split = model_split(e)
        if not e.violations and not e.tripped:
            return f"{col.title}: all {e.states} crash states{where} fine{extra}{split}"
        kinds = ", ".join(sorted(e.tripped))
        broken = sum(b for _, b in e.by_model.values()) if e.by_model else len(e.violations)
        return f"{col.title}: {broken} of {e.states} crash states{where} broken ({kinds}){extra}{split}"

    def explain(self, col: "Column", checks: set, causes: list, message: Optional[str], rerun: str) -> str:
        """The first failure in full: the crash state behind the test that recorded ``checks`` (ids
        of the level's namespace) and ``causes`` and failed with ``message`` (None: no test failed),
        or "" when the column has nothing to add to the test's own message."""
        e = col.exploration
        if e is not None and e.violations:
            v = next((v for v in e.violations if v.invariant in checks and v.cause in causes), None)
            if v is None and causes and not checks and message is not None:
                # A test whose cause no crash state shows (the file a finished run left) speaks for itself.
                return with_rerun(message.strip(), rerun)
            if v is None:
                v = next((v for v in e.violations if v.invariant in checks), e.violations[0])
            if rerun and not v.rerun:
                v.rerun = rerun
            return v.explain()
        if e is not None and (e.error or e.unseen):
            return e.report(rerun)
        if col.extra_explain:
            return with_rerun(col.extra_explain, rerun)
        return ""


class NamedChecks(ColumnMeaning):
    """A column with one row per named check (``problems`` maps each failing check id to its story).

    The level words its summary: ``fine`` when every check holds, ``failing`` when some do not, each
    a format string that may use ``{title}``, ``{rows}`` (checks shown), ``{bad}`` (failing),
    ``{names}`` (their ids, sorted) and ``{states}`` (crash states); ``stuck_after`` ends the
    summary of a column whose code got stuck after some checks were shown; ``passes`` and
    ``disagrees`` are what ``check`` says of the column when all passes, and when the tests pass but
    the column does not; ``legend`` heads the list of what each cell word means (see
    :class:`ColumnMeaning`)."""

    def __init__(self, fine: str, failing: str, stuck_after: str = ColumnMeaning.stuck_after,
                 passes: str = "every check in the matrix", disagrees: str = "the matrix above shows a check that fails",
                 legend: str = ColumnMeaning.legend):
        self.fine, self.failing, self.stuck_after = fine, failing, stuck_after
        self.passes, self.disagrees, self.legend = passes, disagrees, legend

    def failed(self, col: "Column") -> bool:
        return bool(col.problems) or not col.cells

    def tripped(self, col: "Column") -> set:
        return (set(col.problems) if col.cells else {"ERROR"}) | ({"STUCK"} if col.stuck is not None else set())

    def summary(self, col: "Column") -> str:
        if not col.cells:
            return f"{col.title}: {col.note}"
        words = self.failing if col.problems else self.fine
        return words.format(title=col.title, rows=len(col.cells), bad=len(col.problems),
                            names=", ".join(sorted(col.problems)), states=col.states)

    def explain(self, col: "Column", checks: set, causes: list, message: Optional[str], rerun: str) -> str:
        if not col.problems:
            return ""
        check_id = next((c for c in col.problems if c in checks), next(iter(col.problems)))
        story = col.problems[check_id]
        if hasattr(story, "explain"):
            if rerun and not story.rerun:
                story.rerun = rerun
            return story.explain()
        return with_rerun(story, rerun)


LOOP = ColumnMeaning()


@dataclass
class Column:
    """What one loop's crash points hold: ``cells[key]`` is the list of verdicts at that row.

    ``namespace`` is the level's check namespace (its legend words come first); ``meaning`` says
    what the cells add up to (:class:`ColumnMeaning`)."""

    title: str
    cells: dict = field(default_factory=dict)
    labels: dict = field(default_factory=dict)
    # Rows whose phase this loop saved nothing in (labelled "no save"): beside a loop that did save
    # there, the matrix takes that loop's label.
    unsaved: set = field(default_factory=set)
    exploration: Optional[Exploration] = None
    note: str = ""
    problems: dict = field(default_factory=dict)   # check id -> its story (a column of named checks)
    namespace: str = "loop"
    meaning: ColumnMeaning = LOOP

    states: int = 0
    extra_bad: list = field(default_factory=list)   # whole-run checks that failed (level 6: BYTES)
    extra_explain: str = ""                         # the lesson of the first of them
    stuck: Optional[Hang] = None   # when the code got stuck while this column was drawn

    @property
    def failed(self) -> bool:
        return self.stuck is not None or self.meaning.failed(self)

    @property
    def tripped(self) -> set:
        """What broke, by id: invariants for loop columns, the level's check ids for named checks."""
        return self.meaning.tripped(self)

    def summary(self) -> str:
        if self.stuck is not None:
            after = self.meaning.stuck_after if self.cells else ColumnMeaning.stuck_after
            return f"{self.title}: stuck in {self.stuck.function} (stopped after {self.stuck.seconds:g} s), {after}"
        return self.meaning.summary(self)

    def explain(self, checks: Iterable[str], causes: Iterable[str], message: Optional[str] = None,
                rerun: str = "") -> str:
        """The first failure in full, for the test that recorded ``checks`` (qualified ids, as a test
        records them) and ``causes``; "" when the test's own message says it best."""
        ids = {registry.split(c)[1] for c in checks}
        return self.meaning.explain(self, ids, list(causes), message, rerun)


# How the level tests split the crash models: a killed process, a power cut that loses unsynced data,
# and a power cut that also loses or reorders folder changes. One test per group, so its counts are ours.
MODEL_GROUPS = (("M1", "M2"), ("M3",), ("M4", "M5"))


def models_words(models: Any) -> str:
    """``M1 and M2``, ``M3``: the crash models a count was taken under."""
    models = list(models)
    return models[0] if len(models) == 1 else f"{', '.join(models[:-1])} and {models[-1]}"


def model_split(e: Exploration) -> str:
    """The crash states counted per group of crash models, when a run spans several groups.

    Each test of a level explores one group, so these are the numbers its messages print; the total
    in the summary is their sum.
    """
    groups = [[m for m in g if m in e.models] for g in MODEL_GROUPS]
    groups = [g for g in groups if g]
    if len(groups) < 2 or not e.by_model:
        return ""
    parts = []
    for g in groups:
        states = sum(e.by_model.get(m, (0, 0))[0] for m in g)
        broken = sum(e.by_model.get(m, (0, 0))[1] for m in g)
        parts.append(f"{models_words(g)}: {broken} of {states}")
    return "\n    under " + "; ".join(parts)


def _phase_label(window: Any, saved: Optional[set] = None) -> tuple[tuple, str]:
    """(row key, words) of a window's phase. ``saved`` holds the row keys of phases in which the loop
    touched a file: a phase where it saved nothing is not called a save point (None: all are)."""
    phase, turn = window.phase, window.turn
    names = getattr(window, "names", None)
    if names and phase in ("tool", "B") and len(names) > 1:
        # A turn with several calls (level 5): each call has its own rows.
        call = getattr(window, "calls", 0)
        current = getattr(window, "current", "") or window.tool_name
        if phase == "tool":
            return ("tool", turn, call), f"turn {turn}, call {call} of {len(names)} (`{current}`) running"
        if saved is not None and ("B", turn, call) not in saved:
            return ("B", turn, call), f"turn {turn}, call {call} of {len(names)} returned, no save"
        return ("B", turn, call), f"turn {turn}, save point B after call {call} of {len(names)}"
    if phase == "A":
        if saved is not None and ("A", turn) not in saved:
            return ("A", turn), f"turn {turn}, `{window.tool_name}` named, no save"
        return ("A", turn), f"turn {turn}, save point A"
    if phase == "B":
        if saved is not None and ("B", turn) not in saved:
            return ("B", turn), f"turn {turn}, `{window.tool_name}` returned, no save"
        return ("B", turn), f"turn {turn}, save point B"
    if phase == "final" and saved is not None and ("final", 0) not in saved:
        return ("final", 0), "final answer, no save"
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


def row_key(window: Any, ops: list, point: int) -> tuple[tuple, str, str]:
    """``(row key, phase words, step words)`` of the crash point ``point`` (no file step once done)."""
    phase_key, phase_words = _phase_label(window)
    step = _step(ops[point - 1] if point else None) if phase_key[0] != "done" else ""
    return phase_key + (step,), phase_words, step


def column(title: str, exploration: Exploration, task: str, windows_fn: Any = windows_for) -> Column:
    """Group every crash state of ``exploration`` into rows of the loop's words."""
    col = Column(title, exploration=exploration, stuck=exploration.stuck)
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

    # The phases in which this loop touched a file: only those are labelled as save points.
    saved = {_phase_label(windows[point])[0] for point in range(1, len(ops) + 1) if ops[point - 1].kind in STEP_WORDS}

    def add(point: int, torn: bool) -> None:
        phase_key, phase_words = _phase_label(windows[point], saved)
        step = "mid write" if torn else _step(ops[point - 1] if point else None)
        if phase_key[0] == "done":
            step = ""
        key = phase_key + (step,)
        col.labels[key] = (phase_words, step)
        if phase_key[0] in ("A", "B", "final") and phase_key not in saved:
            col.unsaved.add(key)
        cell = col.cells.setdefault(key, [])
        for word in bad.get((point, torn), [OK]):
            if word not in cell:
                cell.append(word)

    for point in range(len(ops) + 1):
        add(point, False)
        # (A write joined from several is crashed in the middle under M1 too: between two of its parts.)
        if point < len(ops) and ops[point].kind == "write" and (ops[point].data or ops[point].size) \
                and (torn_models or ops[point].cuts):
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


def load_module(path: Path, tag: str = "matrix") -> Any:
    """Import ``path`` as a fresh module (a new copy each call, so edits are always seen).

    Raises :class:`grader.engine.loader.ImportProblem`, whose text says why, if it will not import
    (a top level that never ends included: it is stopped, and the text says where).
    """
    try:
        with time_limit(loop_timeout(), owner=str(path)):
            return loader.load_file(path, tag)
    except loader.ImportProblem as exc:
        if isinstance(exc.__cause__, LoopTimeout):
            raise loader.ImportProblem(str(exc.__cause__)) from None
        raise


def models_line(level: Any) -> str:
    return "; ".join(f"{m} {MODEL_NAMES.get(m, m)}" for m in level.crash_models)


# -- the tests' run, shown in the column --------------------------------------------------------------------

_SHARED: Optional[dict] = None  # while tests_and_column_share is open: key -> what was computed


@contextlib.contextmanager
def tests_and_column_share() -> Iterator[None]:
    """While open, an exploration a level module passes through :func:`shared` is made once. ``check`` in
    one process (each check of ``watch``) runs the level's tests and then draws its column: the column
    then shows the very run the tests judged, instead of running the learner's code on it again."""
    global _SHARED
    outer, _SHARED = _SHARED, {}
    try:
        yield
    finally:
        _SHARED = outer


def shared(key: Callable[[], Optional[tuple]], compute: Callable[[], Any]) -> Any:
    """``compute()``; while :func:`tests_and_column_share` is open, made once per ``key()`` (the learner's
    files, the scenario and the options: :func:`share_key`; None: not shared). Share only a computation
    those decide: not one after a test set a value on the learner's module or patched something."""
    if _SHARED is None:
        return compute()
    name = key()
    if name is None:
        return compute()
    if name not in _SHARED:
        _SHARED[name] = compute()
    return _SHARED[name]


def share_key(functions: Iterable[Any], scenario: Any, **options: Any) -> Optional[tuple]:
    """What a run of the learner's ``functions`` on ``scenario`` depends on: the file each comes from as
    it is on disk now, the scenario's every field, the options. None if one of them is not a learner's
    function (a kit test's own), which is never shared."""
    where = []
    for fn in functions:
        found = fresh.origin(fn)
        if found is None:
            return None
        try:
            seen = os.stat(found[0])
        except OSError:
            return None
        where.append((found, seen.st_ino, seen.st_size, seen.st_mtime_ns))
    try:
        fingerprint = hashlib.sha256(pickle.dumps(scenario, protocol=pickle.HIGHEST_PROTOCOL)).hexdigest()
    except Exception:  # noqa: BLE001 - a scenario that cannot be pickled is simply not shared
        return None
    return (tuple(where), fingerprint, tuple(sorted(options.items())))
