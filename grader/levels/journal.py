"""Level 6: checkpoints whose cost per turn stays flat, judged through the learner's own loader.

A loop that writes the whole history at every save writes turn 200's history twice in turn 200:
the bytes per turn grow with the conversation, so the total grows with the square of the turns.
Level 6 lets the learner store the state in any files they like (an append-only journal, a base
snapshot plus a journal, compaction now and then) and asks two things:

* **the crash guarantees of level 2 still hold**, judged on what the learner's
  ``load_checkpoint(directory)`` returns for each crash state: the crash state's files (M1 and M2
  rebuild every file of the checkpoint directory) are written into a scratch directory and the
  loader reads them. It returns the six fields, or None (or raises FileNotFoundError) when there
  is no checkpoint yet; any other exception counts as PARSE.
* **the bytes stay linear** (invariant BYTES): the recorder's trace gives every byte that reached
  the OS, exactly and the same on every run. Over a long run with small tool results, the bytes
  written up to turn t, divided by the size of the conversation at turn t (its JSON), must stay
  under :data:`AMPLIFICATION_LIMIT` from turn :data:`FROM_TURN` on. Whole-history saves give a
  ratio that grows with t (about t); a journal keeps it flat, compaction included, as long as the
  compactions get rarer as the state grows.
"""

from __future__ import annotations

import json
import os
import random
from collections import deque
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

from grader.levels import api
from grader.levels.api import (check, check_names, clone, compute_reference_saves, Exploration, explore_loop, Finding,
                               FreshCall, FreshProcessDied, fresh_width, from_turns, hang_mark, hangs_since, KnownHang, Layout, LevelModule,
                               loop_timeout, LoopTimeout, parse_cached, record_run, run_fresh_each, Scenario, scratch_root,
                               ScriptedModel, support_tickets, time_limit, tool_result_message, tool_use_blocks,
                               UnsafeName, Violation, windows_for)

LONG_TURNS = 200
AMPLIFICATION_LIMIT = 10.0
FROM_TURN = 50
EARLY = (51, 100)
LATE = (151, 200)


# -- the long conversation ------------------------------------------------------------------------------

def long_conversation(turns: int = LONG_TURNS, seed: int = 0) -> Scenario:
    """A task of ``turns`` tool calls with small ASCII results, so the history grows steadily.

    Small results make the cost of rewriting the history stand out: each turn adds a few hundred
    bytes, and a whole-history save at turn t writes all t turns of them again.
    """
    rng = random.Random(seed)
    words = ["open", "closed", "billing", "login", "refund", "shipping", "bug", "feature", "urgent", "later"]
    calls = []
    for i in range(turns):
        ticket = f"T-{5000 + i}"
        result = json.dumps({"ticket": ticket, "label": rng.choice(words)})
        calls.append(("label_ticket", {"ticket": ticket}, result))
    return from_turns("Label each of last week's tickets, one at a time", calls,
                      f"Done: {turns} tickets labelled.", seed=seed, name=f"a long task of {turns} turns")


class _SettledModel(ScriptedModel):
    """The long task's model, which gives its final answer early once the byte verdict is settled.

    The verdict is the worst ratio of bytes written to the size of the conversation, from turn
    FROM_TURN on. Once a turn past that is well over the limit, no later turn can bring the worst
    back under it, and a loop that rewrites its whole history would spend most of a learner's wait
    on turns that change nothing. A loop within the limit never trips this and runs all the turns.
    """

    stopped_at: Optional[int] = None

    def __init__(self, scenario: Scenario):
        super().__init__(scenario)
        self._seen = 0
        self._written = 0
        self._sizes = _history_lengths(scenario)

    def __call__(self, *, tools: Any = None, messages: Any = None, **kwargs: Any) -> dict:
        index = len(self.checked(messages))  # what a model would refuse is refused here first
        active = api.active_recorder()
        if active is not None and FROM_TURN <= index < len(self.scenario.responses) - 1:
            ops = active.ops
            self._written += sum(len(op.data or b"") for op in ops[self._seen:] if op.kind == "write")
            self._seen = len(ops)
            # Twice the limit, measured against the messages alone (a save holds a little more).
            if self._written > 2 * AMPLIFICATION_LIMIT * self._sizes[index]:
                self.calls += 1
                self.stopped_at = index
                return clone(self.scenario.responses[-1])
        return self.respond(messages, index)


def _history_lengths(scenario: Scenario) -> list:
    """``len(json.dumps(messages))`` of the messages a correct loop sends on its k-th model call, for each k.

    Worked out once, message by message: encoding the whole history again at each of 200 calls
    cost more than the learner's own saves. A loop whose messages differ from these (a bug the
    crash checks report) may stop a turn earlier or later; the byte verdict does not change.
    """
    sizes, total, count = [], len(json.dumps({"role": "user", "content": scenario.task})), 1
    for response, result in zip(scenario.responses, scenario.results + [None]):
        sizes.append(2 + total + 2 * (count - 1))
        blocks = tool_use_blocks(response.get("content"))
        if result is None or not blocks:
            break
        total += len(json.dumps({"role": "assistant", "content": response["content"]}))
        total += len(json.dumps(tool_result_message(blocks[0], result)))
        count += 2
    return sizes


@dataclass
class _LongScenario(Scenario):
    def model(self) -> ScriptedModel:
        return _SettledModel(self)


# -- bytes written ---------------------------------------------------------------------------------------

def shared_reference_saves(task: str, responses: list, results: list) -> list:
    """What :func:`~grader.engine.checkpoint.reference_saves` returns, without its cache (a long
    run's 200 responses would be copied to key it). Treat the returned states as read-only."""
    return compute_reference_saves(task, list(responses), list(results))


def history_sizes(ops: list, task: str, saves: Optional[list] = None) -> list:
    """The size in bytes of the conversation's JSON after each turn's results are recorded (index t-1)."""
    if saves is None:
        responses = [op.payload[1] for op in ops if op.kind == "model_end"]
        results = [op.payload[1] for op in ops if op.kind == "tool_end"]
        saves = shared_reference_saves(task, responses, results)
    sizes, fixed, inner = [], None, 0
    counted = 0
    for label, state in saves:
        if label != "B":
            continue
        messages = state["messages"]
        for m in messages[counted:]:
            inner += len(json.dumps(m, ensure_ascii=False).encode("utf-8"))
        counted = len(messages)
        fixed = len(json.dumps(dict(state, messages=[]), ensure_ascii=False).encode("utf-8"))
        sizes.append(fixed + inner + 2 * max(0, len(messages) - 1))
    return sizes


def bytes_by_turn(ops: list) -> list:
    """Bytes that reached the OS by the end of each turn (index t-1): every write before the next model call."""
    out, total = [], 0
    model_calls = 0
    for op in ops:
        if op.kind == "write":
            total += len(op.data)
        elif op.kind == "model_start":
            model_calls += 1
            if model_calls >= 2:
                out.append(total)
    return out


@dataclass
class ByteReport:
    """What a long run wrote, turn by turn."""

    scenario: str
    written: list          # cumulative bytes written by the end of turn t (index t-1)
    history: list          # size of the conversation's JSON at the end of turn t
    total: int = 0         # every byte the run wrote, the final save included
    planned: int = 0       # the turns the task had; fewer ran when the verdict was settled early

    @property
    def turns(self) -> int:
        return min(len(self.written), len(self.history))

    def amplification(self, turn: int) -> float:
        """Bytes written by the end of ``turn``, per byte of the conversation at that turn."""
        return self.written[turn - 1] / max(1, self.history[turn - 1])

    def per_turn(self, first: int, last: int) -> float:
        """Average bytes written per turn over turns ``first`` to ``last`` (inclusive)."""
        before = self.written[first - 2] if first >= 2 else 0
        return (self.written[last - 1] - before) / (last - first + 1)

    @property
    def worst(self) -> tuple:
        """(turn, amplification) where the ratio is highest, from FROM_TURN on."""
        start = max(1, min(FROM_TURN, self.turns))
        return max(((t, self.amplification(t)) for t in range(start, self.turns + 1)), key=lambda x: x[1],
                   default=(0, 0.0))

    @property
    def cut_short(self) -> bool:
        """The loop's run ended before the turns the verdict is judged on (it returned early, not
        the model: an early final answer only ever comes past FROM_TURN)."""
        return self.turns < min(FROM_TURN, self.planned) if self.planned else False

    @property
    def ok(self) -> bool:
        return self.turns > 0 and not self.cut_short and self.worst[1] <= AMPLIFICATION_LIMIT

    def explain(self) -> str:
        """The verdict in a learner's words, with the numbers behind it."""
        n = self.turns
        if self.cut_short or not n:
            calls = len(self.history)
            return (f"BYTES not judged: the bytes written per turn are judged from turn {FROM_TURN} of a "
                    f"{self.planned}-turn task, but your loop's run of it ended after {calls} tool "
                    f"call{'s' if calls != 1 else ''}, with the model still asking for more.\n"
                    "  run_agent returned before the model's final answer, so there is no long run to measure. "
                    "The first check of this level (the loop finishes the task) shows where it stops; once it "
                    "runs to the end, its bytes are measured here.")
        turn, worst = self.worst
        early = self.per_turn(*EARLY) if n >= EARLY[1] else None
        late = self.per_turn(*LATE) if n >= LATE[1] else None
        lines = [f"BYTES {'holds' if self.ok else 'broken'}: the bytes written per turn must stay bounded as the "
                 "conversation grows.",
                 f"  Over {n} turns your loop wrote {_size(self.written[n - 1])}; the conversation itself is "
                 f"{_size(self.history[n - 1])} of JSON, so it wrote it about {self.amplification(n):.1f} times over.",
                 f"  The worst ratio is {worst:.1f} at turn {turn} (the limit is {AMPLIFICATION_LIMIT:g} from turn "
                 f"{FROM_TURN} on)."]
        if self.planned > n:
            lines.append(f"  The task had {self.planned} turns; the model gave its final answer after turn {n}, "
                         f"once the ratio past turn {FROM_TURN} was far over the limit, since no later turn "
                         "could undo that.")
        if early is not None and late is not None:
            lines.append(f"  Bytes per turn: {early:,.0f} over turns {EARLY[0]}-{EARLY[1]}, {late:,.0f} over turns "
                         f"{LATE[0]}-{LATE[1]} ({late / max(1.0, early):.2f} times as many).")
        if not self.ok:
            lines.append("  A save that rewrites the whole history costs more at every turn, so the total grows with "
                         "the square of the turns: a 1000-turn task writes hundreds of times its own size. Write "
                         "only what changed since the last save, and rewrite the whole state only now and then, "
                         "less often as it grows.")
        return "\n".join(lines)


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    return str(n)


def byte_report(ops: list, scenario: Scenario, saves: Optional[list] = None) -> ByteReport:
    total = sum(len(op.data) for op in ops if op.kind == "write")
    return ByteReport(scenario.name, bytes_by_turn(ops), history_sizes(ops, scenario.task, saves), total)


# -- reading a crash state through the learner's loader ------------------------------------------------------

class LoaderFailure(str):
    """What the learner's loader raised on a crash state (a str, so the engine can cache on it)."""


_reading: Optional[list] = None
_hooked = False
# Whether the loader running now did anything that may change a file: opened one for writing, or
# raised an audit event not known to leave files alone. Until a loader has, the reader can trust
# that its scratch folder still holds exactly what it wrote there.
_touched = [False]
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_HARMLESS = frozenset({"os.listdir", "os.scandir", "glob.glob", "glob.glob/2", "pathlib.Path.glob",
                       "pathlib.Path.rglob", "import", "compile", "exec", "sys._getframe", "object.__getattr__",
                       "marshal.loads", "code.__new__"})


def _note_reads(event: str, args: tuple) -> None:
    if _reading is None:
        return
    if event == "open":
        if args and isinstance(args[0], (str, bytes, os.PathLike)):
            _reading.append(os.fsdecode(args[0]))
        mode = args[1] if len(args) > 1 else None
        flags = args[2] if len(args) > 2 else 0
        if (set(mode) - set("rbt") if isinstance(mode, str) else not isinstance(flags, int) or flags & _WRITE_FLAGS):
            _touched[0] = True
    elif event not in _HARMLESS:
        _touched[0] = True


def _load_once(load: Callable[[str], Any], directory: str, timeout: Optional[float]) -> tuple:
    """Call the learner's loader on ``directory`` once: ``(answer, files opened, touched, stopped)``.

    ``answer``: the JSON bytes of what it returned, None when it found no checkpoint, or a
    :class:`LoaderFailure`. ``touched``: it may have changed a file. ``stopped``: ``(kind, message,
    where, hang)`` when it got stuck (or was refused as stuck before), else None. Plain data: this
    runs in a fresh process (see :meth:`LoaderReader.each`).
    """
    global _hooked, _reading
    if not _hooked:
        sys.addaudithook(_note_reads)
        _hooked = True
    out: Any = None
    loaded: Any = None
    _reading = []
    _touched[0] = False
    try:
        with time_limit(timeout, owner=load):
            loaded = load(directory)
    except FileNotFoundError:
        loaded = None
    except LoopTimeout as exc:
        return None, [], _touched[0], (type(exc).__name__, str(exc), exc.where, exc.hang)
    except Exception as exc:  # noqa: BLE001 - a learner's loader may raise anything; that is the finding
        loaded, out = None, LoaderFailure(f"{type(exc).__name__}: {exc}"[:300])
    finally:
        opened, _reading = _reading, None
    if loaded is not None:
        out = _as_json(loaded)
    return out, opened, _touched[0], None


def _as_json(loaded: Any) -> Any:
    """The JSON bytes of what the loader returned (a LoaderFailure if it is not JSON data)."""
    try:
        try:
            return json.dumps(loaded, ensure_ascii=False, check_circular=False).encode("utf-8")
        except RecursionError:  # a cycle, or very deep: encoded again as before, to fail as before
            return json.dumps(loaded, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        return LoaderFailure(f"it returned something that is not JSON data ({exc})")


class _Slot:
    """A scratch folder the reader lays crash states out in, and what it last put there."""

    def __init__(self, scratch: str):
        self.scratch = scratch
        self.directory = os.path.join(scratch, "checkpoints")
        self.written: dict = {}   # name -> bytes, as last put in the folder
        self.folders: set = set()  # the subfolders made there
        # True while the folder holds exactly ``written`` and ``folders``: no loader call has changed
        # anything in it (a loader that ever opened a file for writing is never trusted).
        self.exact = False

    def materialise(self, files: dict, dirs: tuple = ()) -> None:
        # Names from the run, laid out only as plain names inside the folder, relative to its
        # descriptor and without following links (grader.engine.layout); checked before anything changes.
        check_names(files, dirs)
        if not self.exact:
            os.makedirs(self.scratch, exist_ok=True)  # the judge's own folder, named by the judge
        exact, self.exact = self.exact, False  # until the loader is known to have left the folder alone
        with Layout(self.directory, within=self.scratch) as folder:
            self._lay_out(folder, files, dirs, exact)

    def _lay_out(self, folder: Layout, files: dict, dirs: tuple, exact: bool) -> None:
        # Rewrite only what differs from the last crash state loaded (consecutive states share most
        # files), and take away what the loader itself may have added. Files may sit in subfolders
        # (a journal under wal/): names are paths relative to the checkpoint folder.
        wanted_dirs = set(dirs) | {n.rsplit("/", 1)[0] for n in files if "/" in n}
        for parent in list(wanted_dirs):
            while "/" in parent:
                parent = parent.rsplit("/", 1)[0]
                wanted_dirs.add(parent)
        grown: dict = {}
        if exact:
            # Nothing but this reader changed the folder: what is there is what it wrote. A file that
            # only grew (a journal, from one crash point to the next) gets just its new bytes.
            for rel in [r for r, data in self.written.items() if files.get(r) != data]:
                new, old = files.get(rel), self.written[rel]
                if new is not None and len(new) > len(old) and new.startswith(old):
                    grown[rel] = new
                    continue
                folder.remove(rel)
                del self.written[rel]
            for rel_dir in sorted(self.folders - wanted_dirs, reverse=True):
                folder.remove_tree(rel_dir)
        else:
            for rel_dir, _dirnames, filenames in folder.walk():
                for name in filenames:
                    rel = f"{rel_dir}/{name}" if rel_dir else name
                    if rel not in files or self.written.get(rel) != files[rel]:
                        folder.remove(rel)
                        self.written.pop(rel, None)
                if rel_dir and rel_dir not in wanted_dirs:
                    folder.remove_tree(rel_dir)
        for sub in sorted(wanted_dirs - self.folders if exact else wanted_dirs):
            if sub:
                folder.make_dir(sub)
        self.folders = {f for f in wanted_dirs if f}
        for name, data in grown.items():
            folder.write(name, memoryview(data)[len(self.written[name]):], append=True)
            self.written[name] = data
        for name, data in files.items():
            if name not in self.written:
                folder.write(name, data)
                self.written[name] = data

    def loaded(self, trusted: bool) -> None:
        """After a load here: ``trusted`` if no loader call has ever opened a file for writing."""
        self.exact = trusted
        if not trusted:
            self._forget_changes()

    def _forget_changes(self) -> None:
        """A loader may repair what it reads (cut a torn line off, say): never trust those files again."""
        try:
            folder = Layout(self.directory, within=self.scratch, make=False)
        except (OSError, UnsafeName):
            self.written.clear()
            return
        with folder:
            for name in list(self.written):
                if folder.read(name) != self.written[name]:
                    self.written.pop(name)


class _Pending:
    """A crash state on its way through :meth:`LoaderReader.each`."""

    def __init__(self, state: Any, names: frozenset, answer: Any):
        self.state, self.names, self.answer = state, names, answer
        self.slot: Optional[_Slot] = None   # where it was laid out, when the loader must be asked
        self.error: Optional[BaseException] = None


_UNKNOWN = object()


class LoaderReader:
    """``reader(crash_state)`` for :func:`~grader.engine.explore.check_trace`: the loader's view of the files.

    Returns the JSON bytes of what ``load_checkpoint`` returned, None when it found no checkpoint,
    or a :class:`LoaderFailure` when it raised. The loader is called again only when something it
    could see changed: the names in the folder, or the bytes of a file it opened last time (a crash
    state that differs only in a half-written temp file it never opens gives the same answer).
    :meth:`each` reads many crash states, several at once, each in a scratch folder of its own.
    """

    def __init__(self, load: Callable[[str], Any], scratch: str, timeout: Optional[float] = None):
        self.load = load
        self.timeout = timeout    # for each call of the loader: one that never returns stops the exploration
        self.scratch = scratch
        self.slots = [_Slot(scratch)]   # the first is scratch/checkpoints; more for loads side by side
        self.memo: dict = {}      # (names, names read) -> {their bytes: answer}
        self.reads: dict = {}     # names -> the sets of names the loader opened, for that listing
        self.calls = 0
        self._loader_writes = False

    def __call__(self, state: Any) -> Any:
        return next(self.each([state], width=1))[1]

    def each(self, states: Iterable[Any], width: Optional[int] = None) -> Iterator[tuple[Any, Any]]:
        """``(state, what the loader made of it)`` for each crash state, in order.

        The loader runs in a process that never saw the run nor an earlier crash state (after a real
        crash only the files are left); up to ``width`` of them at once (one per fork server), each on
        a folder of its own, so the answers come sooner on a machine with more than one core.
        """
        width = fresh_width() if width is None else width
        while len(self.slots) < width:
            self.slots.append(_Slot(os.path.join(self.scratch, f"side-{len(self.slots)}")))
        pending: deque = deque()

        def calls() -> Iterator[Optional[FreshCall]]:
            turn = 0
            for state in states:
                names = frozenset(state.files) | frozenset(os.path.join(d, "") for d in getattr(state, "dirs", ()))
                while self._known(state, names) is _UNKNOWN and self._may_repeat(state, names, pending):
                    yield None  # a load on its way may show this state's answer: wait for it, not load again
                item = _Pending(state, names, self._known(state, names))
                pending.append(item)
                if item.answer is not _UNKNOWN:
                    continue
                item.slot = self.slots[turn % width]
                turn += 1
                try:
                    item.slot.materialise(state.files, getattr(state, "dirs", ()))
                except Exception as exc:  # noqa: BLE001 - raised in its turn, after the states before it
                    item.error = exc
                    return
                self.calls += 1
                yield FreshCall(_load_once, self.load, (item.slot.directory, self.timeout), timeout=self.timeout)

        answers = run_fresh_each(calls(), ahead=width)
        try:
            while True:
                while pending and (pending[0].answer is not _UNKNOWN or pending[0].error is not None):
                    item = pending.popleft()
                    if item.error is not None:
                        raise item.error
                    yield item.state, item.answer
                try:
                    value, died = next(answers)
                except StopIteration:
                    if not pending:
                        return
                    continue
                item = next(i for i in pending if i.slot is not None and i.answer is _UNKNOWN and i.error is None)
                try:
                    item.answer = self._learned(item, value, died)
                except LoopTimeout as exc:
                    item.error = exc
        finally:
            answers.close()

    def _known(self, state: Any, names: frozenset) -> Any:
        """The loader's answer for this state if an earlier one showed it (the files it reads are the same)."""
        for read in self.reads.get(names, ()):
            answer = self.memo[(names, read)].get(tuple(state.files[n] for n in read), _UNKNOWN)
            if answer is not _UNKNOWN:
                return answer
        return _UNKNOWN

    def _may_repeat(self, state: Any, names: frozenset, pending: Iterable[_Pending]) -> bool:
        """Whether a load still on its way might answer for ``state`` too: same names, and the same
        bytes in the files the loader read for those names before (if it never read any of that
        listing yet, the same names are enough: which files count is what that load will show)."""
        reads = self.reads.get(names) or [()]
        return any(item.slot is not None and item.answer is _UNKNOWN and item.error is None and item.names == names
                   and any(all(item.state.files.get(n) == state.files.get(n) for n in read) for read in reads)
                   for item in pending)

    def _learned(self, item: _Pending, value: Any, died: Optional[FreshProcessDied]) -> Any:
        if died is not None:
            out, opened, touched, stopped = LoaderFailure(f"SystemExit: it ended the process it ran in ({died})"), \
                [], True, None
        else:
            out, opened, touched, stopped = value
        if stopped is not None:
            kind, message, where, hang = stopped
            raise (KnownHang if kind == "KnownHang" else LoopTimeout)(message, where, hang)
        self._loader_writes = self._loader_writes or touched
        item.slot.loaded(trusted=not self._loader_writes)
        prefix = item.slot.directory + os.sep
        names, files = item.names, item.state.files
        read = tuple(sorted({os.path.abspath(p)[len(prefix):] for p in opened
                             if os.path.abspath(p).startswith(prefix)} & names))
        self.reads.setdefault(names, [])
        if read not in self.reads[names]:
            self.reads[names].append(read)
        self.memo.setdefault((names, read), {})[tuple(files[n] for n in read)] = out
        return out

    def check(self, raw: Any, window: Any, parsed: dict) -> Optional[Finding]:
        """:func:`check_loaded` (the checker explore_loop is given with this reader)."""
        return check_loaded(raw, window, parsed)


def check_loaded(raw: Any, window: Any, parsed: Optional[dict] = None) -> Optional[Finding]:
    """Level 2's invariants, on what the loader returned rather than on one file's bytes."""
    if isinstance(raw, LoaderFailure):
        where = (" (json counts that line and column within the text load_checkpoint gave json.loads, not "
                 "within the file)" if raw.startswith("JSONDecodeError") else "")
        return Finding("PARSE", f"load_checkpoint raised {raw}{where}",
                       "resume cannot read the checkpoint at all, so the task is lost")
    finding = check(raw, window, parsed)
    if finding is None:
        return None
    if finding.invariant == "COUNTS":
        # The counters are only the story when the messages are a save's own; otherwise (or when
        # the counters are another save's) the loader put together parts of two saves.
        mixed = _mixed_saves(parse_cached(raw, parsed)[0], window)
        if mixed is not None:
            return mixed
    detail = finding.detail.replace("there is no checkpoint.json at all", "load_checkpoint found no checkpoint")
    detail = detail.replace("checkpoint.json holds", "load_checkpoint returned")
    detail = detail.replace("checkpoint.json is an older save", "load_checkpoint returned an older save")
    if finding.blames and finding.detail.endswith(finding.blames):
        # What the loader rebuilt holds no later save; that does not mean the loop made none (a journal
        # the snapshot names may be gone, or a line torn), so the claim that none was made is dropped.
        detail = detail[:-len(finding.blames)] + ". load_checkpoint read back no later save from the files this crash left"
    return Finding(finding.invariant, f"{detail} (as load_checkpoint reads the directory)", finding.resume)


def _mixed_saves(data: Any, window: Any) -> Optional[Finding]:
    """WHOLE, for a loaded state whose messages are no save's the loop could be at, or whose
    messages are one save's and counters another's (None: the messages are right and the counters
    match no save, which is a counting mistake)."""
    counters = ("turns", "tokensUsed", "pendingToolUse")
    messages = data["messages"]
    own = [a for a in window.allowed if a["messages"] == messages]
    if not own and isinstance(messages, list):
        # The right messages in another order: files or lines applied in another order than they were
        # written (sorted as strings, "save-10" comes before "save-9"), not two saves put together.
        keyed = sorted(json.dumps(m, sort_keys=True) for m in messages)
        same = next((a for a in window.allowed if len(a["messages"]) == len(messages)
                     and sorted(json.dumps(m, sort_keys=True) for m in a["messages"]) == keyed), None)
        if same is not None:
            at = next(i for i, (m, w) in enumerate(zip(messages, same["messages"])) if m != w)
            moved = next(j for j, w in enumerate(same["messages"]) if w == messages[at])
            return Finding("WHOLE", f"load_checkpoint returned the {len(messages)} messages of a save, but not in "
                           f"their order: its messages[{at}] is the save's messages[{moved}]. The pieces were "
                           "applied in another order than they were written (names sorted as strings, for "
                           "example, put \"save-10\" before \"save-9\")",
                           "resume continues from a conversation in the wrong order, which the API refuses or "
                           "the model misreads", "mixed")
    if not own:
        sizes = " or ".join(sorted({str(len(a["messages"])) for a in window.allowed}))
        return Finding("WHOLE", f"load_checkpoint returned {len(messages)} messages, but the save in progress and "
                       f"the last completed one hold {sizes}: messages from two saves were put together (lines "
                       "replayed on top of a state that already held them, or an older file read with a newer one)",
                       "resume continues from a conversation that never happened, and the API may refuse it",
                       "mixed")
    theirs = [a for a in window.allowed if all(a[k] == data[k] for k in counters) and a["messages"] != messages]
    if not theirs:
        return None
    other = theirs[0]
    which = "before" if len(other["messages"]) < len(messages) else "after"
    return Finding("WHOLE", f"load_checkpoint returned the {len(messages)} messages of one save with the `turns`, "
                   f"`tokensUsed` and `pendingToolUse` of the save {which} it ({len(other['messages'])} messages): "
                   "parts of two saves. A kill can come between two writes of one save, or cut one write after "
                   "any of its lines, so a loader must apply a save's lines all together or not at all",
                   "resume continues from a state that never existed: its counts and its pending call disagree with "
                   "its conversation", "mixed")


# -- which crash points a long run checks ----------------------------------------------------------------

def sampled_points(ops: list, every: int = 9, first_turns: int = 3, limit: int = 160) -> list:
    """The crash points checked on a long run, at most ``limit`` of them.

    Half go to the points around each rename, truncate, unlink or emptying open (where compaction
    happens, however rare); the rest to the first turns, the last turn, and every ``every``-th point.
    """
    turn_of, turn = [], 0
    for op in ops:
        turn_of.append(turn)
        turn += op.kind == "tool_end"
    turn_of.append(turn)
    last = turn
    around: set = set()
    for op in ops:
        if op.kind in ("rename", "truncate", "unlink", "link") or (op.kind == "open" and "trunc" in op.flags):
            around.update(range(max(0, op.index - 2), min(len(ops), op.index + 3) + 1))
    others = {p for p in range(len(ops) + 1)
              if turn_of[p] < first_turns or turn_of[p] >= last or p % every == 0} - around
    chosen = _spread(sorted(around), limit // 2)
    chosen += _spread(sorted(others), limit - len(chosen))
    return sorted(chosen)


def _spread(points: list, n: int) -> list:
    """``n`` of ``points``, evenly spaced (all of them if there are no more than ``n``)."""
    if len(points) <= n:
        return list(points)
    step = len(points) / n
    return [points[int(i * step)] for i in range(n)]


# -- failures in the words of this level ------------------------------------------------------------

LOADER_WORDS = {
    "PARSE": "load_checkpoint reads every crash state back into one state (finding none is fine only until the "
             "first save completes)",
    "FIELDS": "what load_checkpoint returns has exactly the six protocol keys, with the right types, and version 1",
    "WHOLE": "what load_checkpoint returns is the last completed save or the save in progress: never a mix, never "
             "an older one",
}


@dataclass
class LoaderViolation(Violation):
    """A level-6 failure: the same facts, with the rule stated for a loader over several files."""

    def explain(self) -> str:
        text = Violation.explain(self)
        if self.invariant in LOADER_WORDS:
            first, rest = text.split("\n", 1)
            text = f"{self.invariant} broken: {LOADER_WORDS[self.invariant]}.\n{rest}"
        return text


# -- the front door --------------------------------------------------------------------------------------

@dataclass
class JournalExploration:
    """A level-6 verdict: the crash exploration (through the loader) and, for long runs, the bytes."""

    crashes: Exploration
    bytes: Optional[ByteReport] = None
    loads: int = 0

    @property
    def ok(self) -> bool:
        return self.crashes.ok and (self.bytes is None or self.bytes.ok)

    @property
    def tripped(self) -> set:
        out = set(self.crashes.tripped)
        if self.bytes is not None and not self.bytes.ok and not self.crashes.error:
            out.add("BYTES")
        return out


def explore_journal(run: Callable, load: Callable[[str], Any], scenario: Scenario, *,
                    models: Iterable[str] = ("M1", "M2"), timeout: Optional[float] = 20, sample: bool = False,
                    measure: bool = False, directory: str = "checkpoints", rerun: bool = False) -> JournalExploration:
    """Run ``run`` on ``scenario``, then read every crash state (a sample of them with ``sample``) with
    ``load``, and with ``measure`` judge the bytes the run wrote. Made once for the tests and the column
    of one ``check`` (:func:`~grader.levels.api.tests_and_column_share`)."""
    options = dict(models=tuple(models), timeout=timeout, sample=sample, measure=measure, directory=directory,
                   rerun=rerun)
    return api.shared(lambda: api.share_key((run, load), scenario, **options),
                      lambda: _explore_journal(run, load, scenario, **options))


def _explore_journal(run: Callable, load: Callable[[str], Any], scenario: Scenario, *, models: tuple,
                     timeout: Optional[float], sample: bool, measure: bool, directory: str,
                     rerun: bool) -> JournalExploration:
    computed: list = []  # (task, responses, results) of the last run, and its reference saves

    def windows(ops: list, task: str, points: Optional[set] = None) -> list:
        conversation = (task, [op.payload[1] for op in ops if op.kind == "model_end"],
                        [op.payload[1] for op in ops if op.kind == "tool_end"])
        if not computed or computed[0] != conversation:  # a second run usually has the same conversation
            computed[:] = [conversation, shared_reference_saves(*conversation)]
        return windows_for(ops, task, saves=computed[1], points=points)

    planned = scenario.turns
    if measure:
        scenario = _LongScenario(**vars(scenario))
    # Every folder of the exploration in memory where there is one: the loader is called on a hundred
    # crash states and more, each rewriting files in its scratch folder.
    root = scratch_root()
    with tempfile.TemporaryDirectory(prefix="crashcourse-load-", dir=root) as scratch:
        reader = LoaderReader(load, scratch, timeout)
        crashes = explore_loop(run, scenario, models=models, timeout=timeout, reader=reader, checker=reader.check,
                               windows=windows, sample=sampled_points if sample else None, directory=directory,
                               rerun=rerun, scratch=root)
    crashes.violations = [LoaderViolation(**vars(v)) for v in crashes.violations]
    inside = crashes.folder + os.sep
    if crashes.error is None and not any(op.kind == "write" and (op.path or "").startswith(inside)
                                         or op.kind in ("rename", "link") and (op.dest or "").startswith(inside)
                                         for op in crashes.ops):
        elsewhere = sorted({os.path.relpath(op.path, crashes.workdir) for op in crashes.ops
                            if op.kind == "write" and op.path and op.path.startswith(crashes.workdir + os.sep)})
        given = crashes.folder if "elsewhere" in os.path.relpath(crashes.folder, crashes.workdir).split(os.sep) \
            else os.path.relpath(crashes.folder, crashes.workdir)
        crashes.error = (f"run_agent finished without writing a single byte to the checkpoint directory it was "
                         f"given ({given!r})" + (f"; it wrote {', '.join(map(repr, elsewhere[:3]))} instead"
                                                 if elsewhere else "")
                         + ". Do save_checkpoint and run_agent use their `directory` argument?")
    report = None
    if measure and crashes.error is None:
        report = byte_report(crashes.ops, scenario, computed[1] if computed else None)
        report.planned = planned
    return JournalExploration(crashes, report, reader.calls)



# -- the level plug-in ---------------------------------------------------------------------------------

class JournalLevel(LevelModule):
    """Level 6: the level-2 crash rows, read through the learner's loader, plus a row for the bytes."""

    namespace = "loop"
    own_loader = True

    def column(self, title: str, folder: Path, level: api.Level, seed: int = 0) -> Optional[api.Column]:
        """The bytes row runs the loop uncrashed on the long task the tests use (its model answers early
        once the verdict is settled, as there) and compares what it wrote with the size of the
        conversation, so the demo's ratio and turn count are the ones pytest prints."""
        module, failed = self.import_file(title, folder, level)
        if failed is not None:
            return failed
        if not callable(getattr(module, level.function, None)):
            return api.failed_column(title, f"{level.files[0]} has no function `{level.function}`")
        load = getattr(module, "load_checkpoint", None)
        if not callable(load):
            return api.failed_column(title, f"{level.files[0]} has no function `load_checkpoint`")
        scenario = support_tickets(seed)
        # As the tests explore it (their `tickets`), so a check that runs both in one process makes it once.
        result = explore_journal(module.run_agent, load, scenario, models=tuple(level.crash_models) or ("M1", "M2"),
                                 timeout=loop_timeout(), directory=api.NESTED_FOLDER, rerun=True)
        col = api.column(title, result.crashes, scenario.task)  # one call per turn: level 2's rows name the points
        if result.crashes.error:
            return col
        long = _LongScenario(**vars(long_conversation(LONG_TURNS, seed=seed)))
        mark = hang_mark()
        with tempfile.TemporaryDirectory(prefix="crashcourse-bytes-", dir=scratch_root()) as work:
            recorder, _, error, _ = record_run(module.run_agent, long, work, "checkpoints", timeout=3 * loop_timeout())
        key = ("note", 0, "BYTES")
        col.labels[key] = (f"bytes written over a task of up to {LONG_TURNS} turns, per byte of its history", "")
        stuck = next((hang for _, hang in hangs_since(mark)), None)
        if error:
            col.stuck = stuck
            col.cells[key] = [api.STUCK if stuck is not None else "loop failed"]
            col.extra_bad.append("BYTES")
            col.extra_explain = f"The {LONG_TURNS}-turn run did not finish: {error}"
            return col
        report = byte_report(recorder.ops, long)
        report.planned = LONG_TURNS
        turn, worst = report.worst
        ratio = report.amplification(report.turns)
        if worst <= AMPLIFICATION_LIMIT:
            col.cells[key] = [f"ok ({ratio:.1f}x over {report.turns} turns)"]
        else:
            col.cells[key] = [f"bytes grow ({ratio:.1f}x over {report.turns} turns)"]
            col.extra_bad.append("BYTES")
            col.extra_explain = report.explain()
        return col


LEVEL = JournalLevel()
