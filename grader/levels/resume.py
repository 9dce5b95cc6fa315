"""Crash a run at every point, resume from what it left, and check what resume makes of it (level 4).

The crashed run is a correct writer (the protocol's loop with an atomic save at A, B and the end,
as ``solutions/level2`` does), recorded once. For every crash point (M1: the process killed; the
writer is atomic, so a torn write, M2, only changes the leftover temp file's bytes) the checkpoint
folder is rebuilt in a fresh temporary directory, exactly as the crash left it (leftover temp file
included), and the resume under test runs there against:

- a fresh :class:`~grader.engine.scripted.ScriptedModel`: stateless, it answers by the number of assistant
  messages it is sent, and refuses (as the Messages API would, with a 400) a transcript in which a
  ``tool_use`` is not answered right after it;
- a :class:`KeyedTools` executor whose log of effects carries over the tool calls the crashed run
  had started (a crash while ``publish_table`` runs may come after the table went out). It accepts
  an optional ``tool_use_id=`` keyword: an idempotency key. A call under a key already used is not
  applied again; it returns the first run's result.

What is checked (each failure names its id, like the crash invariants):

``REFUSE``  no checkpoint, or one that is torn, is not the six fields, or has another version:
            resume raises the level's ``CheckpointError``, calls nothing, and leaves the file alone.
``PAIRING`` every ``tool_use`` the model is sent is answered once, right after it.
``ONCE``    a non-idempotent tool's effect happens at most once, counting the crashed run.
``COUNTS``  ``turns`` and ``tokensUsed`` continue from the file (they end where an uncrashed run ends).
``RESUME``  the final state equals the uncrashed run's, except that a call pending in the file may
            be answered by an error ``tool_result`` saying it was interrupted (``"is_error": true``).
``SAVED``   resume keeps saving: a call it runs is ``pendingToolUse`` on disk first, the model sees
            nothing that is not on disk, and the file equals the state resume returns.
``CAP``     a turn cap (the module's ``MAX_TURNS``) counts the turns from before the crash.

This module knows nothing of pytest; ``exercises/level4/test_resume.py`` is a thin face over it.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Optional

from grader.levels import api
from grader.levels.api import (assistant_turns, at_point, check_messages, CHECKPOINT_NAME, crash_states,
                               describe_bytes, exactly_saved, FIELDS, folder_in, free_fsync, FreshCall, FreshProcessDied, Hang, lay_out,
                               LevelModule, loop_timeout, LoopTimeout, MODEL_NAMES, namespaces_of, read_or_none, record_run,
                               Recorder,
                               reference_saves, run_fresh_each, run_reference, Scenario, scratch_root, ScriptedModel,
                               ScriptedModelError, ScriptedToolError, ScriptedTools, short_traceback, snapshot,
                               support_tickets, time_limit, tool_use_blocks, windows_for, working_in)


CHECKS = api.words("resume")  # id -> what holds, declared in grader.levels.registry
# Why the turn cap broke, told apart by resuming the same file under a cap one lower (hints.md
# names these in level 4's task 5).
api.declare_causes("resume", {
    "cap-not-enforced": "the resumed loop never stops at MAX_TURNS",
    "cap-restarted": "the resumed loop counts its turn cap from zero instead of from the file's `turns`",
    "finished-asked-again": "resume calls the model again on a checkpoint whose task had finished (its last "
                            "message is the model's final answer and nothing is pending)",
})


# -- the crashed run's writers -------------------------------------------------------------------------

def _atomic_save(state: dict, directory: str) -> None:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, CHECKPOINT_NAME)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        # The six fields as they are: this loop's state is the script's own JSON data, which a
        # round trip through JSON (snapshot) would give back unchanged, and it is dumped at once.
        json.dump({key: state[key] for key in FIELDS}, f)
    os.replace(path + ".tmp", path)


def reference_writer(task: str, tools: list, call_model: Callable, execute_tool: Callable,
                     directory: str = "checkpoints") -> dict:
    """The protocol's loop, saving atomically at A, B and the end (what ``solutions/level2`` does)."""
    return run_reference(task, tools, call_model, execute_tool, lambda state, label: _atomic_save(state, directory))


def b_only_writer(task: str, tools: list, call_model: Callable, execute_tool: Callable,
                  directory: str = "checkpoints") -> dict:
    """The same loop saving only at B and the end: a crash while a tool runs leaves no trace of it."""
    def save(state: dict, label: str) -> None:
        if label != "A":
            _atomic_save(state, directory)
    return run_reference(task, tools, call_model, execute_tool, save)


# -- the executor resume runs against ------------------------------------------------------------------

class ResumedModel(ScriptedModel):
    """The scripted model, as a resumed run meets it.

    A response the crashed run had already received but not saved is asked for again, and a real
    model answers a new request with new tool_use ids. So here, too, such a response comes back with
    each tool_use id renamed (``renamed`` maps new ids to the script's): an idempotency key taken
    from it is a new key, as it would be against the real API.
    """

    def __init__(self, scenario: Scenario, received: int = 0):
        super().__init__(scenario)
        self.received = received
        self.renamed: dict = {}

    def __call__(self, *, tools: Any = None, messages: Any = None, **kwargs: Any) -> dict:
        index = len(assistant_turns(messages))
        response = self.respond(messages, index)
        if index < self.received:
            for block in tool_use_blocks(response.get("content")):
                new = block["id"] + "_asked_again"
                self.renamed[new] = block["id"]
                block["id"] = new
        return response


class KeyedTools(ScriptedTools):
    """Scripted tools whose effect log starts with the calls the crashed run had started.

    ``execute_tool(name, input, tool_use_id=None)``: with a key, the call is matched by its id, and
    a key already in the log is not applied again (``replays`` counts those).
    """

    def __init__(self, scenario: Scenario, carried: Iterable[tuple] = (), renamed: Optional[dict] = None):
        super().__init__(scenario)
        self.effects = list(carried)
        self.carried = len(self.effects)
        self.replays: list[str] = []
        self.renamed = renamed if renamed is not None else {}
        self.on_call: Optional[Callable[[str, Any, Optional[str]], None]] = None

    def runs_of(self, tool_use_id: str) -> int:
        """How many times the script's call ``tool_use_id`` took effect, under its own id or a new one."""
        return sum(1 for effect in self.effects if self.renamed.get(effect[0], effect[0]) == tool_use_id)

    def __call__(self, name: str, tool_input: Any, tool_use_id: Optional[str] = None, **_: Any) -> str:
        if self.on_call is not None:
            self.on_call(name, tool_input, tool_use_id)
        if tool_use_id is None:
            return super().__call__(name, tool_input)
        script_id = self.renamed.get(tool_use_id, tool_use_id)
        index = next((i for i, b in enumerate(self.blocks) if b["id"] == script_id), None)
        normal = json.loads(json.dumps(tool_input))
        if index is None and any(b["name"] == name and b["input"] == normal for b in self.blocks):
            # The call is the model's, but the key is not its id (a uuid made per attempt, a counter): a key
            # the tool has never seen reads as a new call, so a call that ran before the crash runs again.
            raise ScriptedToolError(
                f"the loop ran {name}({json.dumps(tool_input)[:60]}) under the key {tool_use_id!r}, which is not "
                "the tool_use id the model gave that call. A tool takes a key it has never seen for a new call and "
                "runs it, so a call that ran before the crash would take effect twice; the key must be the call's "
                "own id (pendingToolUse[\"id\"], the block's \"id\"), the same at every attempt")
        if index is None or self.blocks[index]["name"] != name or self.blocks[index]["input"] != normal:
            raise ScriptedToolError(f"the loop ran {name}({json.dumps(tool_input)[:60]}) under the key {tool_use_id!r}, "
                                    "but the model asked for no such call under that id")
        self.calls += 1
        if any(effect[0] == tool_use_id for effect in self.effects):
            self.replays.append(tool_use_id)
        else:
            self.effects.append((tool_use_id, name, tool_input))
        return self.scenario.results[index]


# -- results ---------------------------------------------------------------------------------------------

def _sentence(text: str) -> str:
    """``text`` ending in one full stop: a detail that ends in its own "?" or "." gets no second one."""
    text = text.rstrip()
    return text if text.endswith((".", "?", "!")) else text + "."


@dataclass
class ResumeFailure:
    """One crash state from which resume went wrong, with what a learner needs to see why."""

    check: str
    where: str            # the crash point in the loop's words
    model: str
    on_disk: str          # what checkpoint.json held, in words
    did: str              # what resume did
    detail: str
    rerun: str = ""
    cause: str = ""       # why, as data: a cause of the "resume" namespace, or ""

    def explain(self) -> str:
        lines = [f"{self.check} broken: {CHECKS[self.check]}.",
                 f"  The crashed run: {self.where} ({self.model}, {MODEL_NAMES.get(self.model, self.model)}).",
                 f"  On disk: {_sentence(self.on_disk)}",
                 f"  Your resume_agent: {_sentence(self.did)}",
                 f"  What is wrong: {_sentence(self.detail)}"]
        if self.rerun:
            lines.append(f"  Re-run just this check: {self.rerun}")
        return "\n".join(lines)


@dataclass
class ResumeExploration:
    """What resuming from every crash state of one run found."""

    scenario: str
    writer: str
    states: int = 0
    failures: list = field(default_factory=list)
    error: Optional[str] = None
    stuck: Optional[Hang] = None   # resume_agent got stuck (error then says where): no verdict

    @property
    def ok(self) -> bool:
        return not self.failures and self.error is None

    @property
    def tripped(self) -> set:
        out = {f.check for f in self.failures}
        if self.error:
            out.add("ERROR")
        return out

    def report(self, rerun: str = "", checks: Optional[Iterable[str]] = None) -> str:
        if self.error:
            return self.error
        wanted = set(checks) if checks is not None else set(CHECKS)
        hits = [f for f in self.failures if f.check in wanted]
        if not hits:
            return f"{self.scenario}: resumed from {self.states} crash states, all fine."
        first = hits[0]
        if rerun and not first.rerun:
            first.rerun = rerun
        # One crash state can break several checks: count the states, not the findings.
        wrong = len({(h.where, h.model, h.on_disk) for h in hits})
        lines = [f"{self.scenario}: resuming went wrong from {wrong} of {self.states} crash states "
                 f"({', '.join(sorted({h.check for h in hits}))}).", "", first.explain()]
        others: dict = {}
        for f in hits[1:]:
            others.setdefault((f.check, f.where), f)
        if others:
            lines += ["", "Also, for example:"]
            lines += [f"  {f.check} after a crash {at_point(f.where)}: {f.detail}" for f in list(others.values())[:3]]
        return "\n".join(lines)


# -- running one resume ----------------------------------------------------------------------------------

@dataclass
class _Outcome:
    model: Optional[ResumedModel] = None
    returned: Any = None
    refused: Optional[BaseException] = None
    error: Optional[str] = None
    error_type: str = ""
    tools: Optional[KeyedTools] = None
    model_calls: int = 0
    after: Optional[bytes] = None
    unsaved: Optional[str] = None   # the first moment the file on disk lagged behind
    torn: Optional[str] = None      # what a kill during resume's own saves could leave of checkpoint.json
    stuck: Optional[Hang] = None    # resume_agent got stuck here, or was not run, having got stuck before


@functools.lru_cache(maxsize=32)
def _parse(raw: bytes) -> Any:
    """The JSON in ``raw`` (shared between callers: read it, never change it). The same checkpoint
    is read many times per exploration, and a large one takes milliseconds to decode."""
    return json.loads(raw)


def _plain(value: Any) -> Any:
    """``value`` as it comes back from a JSON round trip (tuples become lists, and so on)."""
    return json.loads(json.dumps(value))


def _watch_disk(path: str, outcome: _Outcome, model: ScriptedModel, tools: KeyedTools) -> Callable:
    """Wrap the model so each call checks the file first; make the tools check it too (SAVED)."""
    def on_disk() -> Optional[dict]:
        raw = read_or_none(path)
        try:
            return _parse(raw) if raw else None
        except ValueError:
            return None

    def call_model(**kwargs: Any) -> dict:
        data = on_disk()
        sent = kwargs.get("messages")
        if outcome.unsaved is None and (data is None or data.get("pendingToolUse") is not None
                                        or (sent != data.get("messages") and _plain(sent) != data.get("messages"))):
            outcome.unsaved = (f"the model was called (call {model.calls + 1} of the resume) with {len(sent or [])} "
                               f"messages while checkpoint.json held "
                               + ("nothing readable" if data is None else
                                  f"{len(data.get('messages') or [])} messages and pendingToolUse "
                                  f"{json.dumps(data.get('pendingToolUse'))[:80]}"))
        outcome.model_calls += 1
        return model(**kwargs)

    def on_tool(name: str, tool_input: Any, tool_use_id: Optional[str]) -> None:
        data = on_disk()
        pending = data.get("pendingToolUse") if isinstance(data, dict) else None
        if outcome.unsaved is None and not (isinstance(pending, dict) and pending.get("name") == name
                                            and pending.get("input") == json.loads(json.dumps(tool_input))):
            outcome.unsaved = (f"tool `{name}` ran while checkpoint.json named "
                               f"{json.dumps(pending)[:80] if pending else 'no pending call'}: a crash during "
                               "it would leave no trace of it")

    tools.on_call = on_tool
    return call_model


@contextlib.contextmanager
def _free_fsync():
    """Level 4 grades what resume does, not durability (level 3 did): fsync returns at once here,
    so that every crash state can be resumed in a few milliseconds. Under ``crashcourse grade`` the
    judge makes the same change in the sandboxed worker (``grader.engine.forwarded.FORWARDED``)."""
    saved = free_fsync()
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(os, name, fn)


_PLAIN_DUMP = json.dump


def _dump_at_once(obj: Any, fp: Any, *, cls: Any = None, default: Any = None, **kw: Any) -> None:
    """``json.dump`` as the learner's resume calls it here: the same text, encoded in one go.

    ``json.dump`` encodes in Python, chunk by chunk (``json.dumps`` uses the C encoder), and
    resume's saves were a third of level 4's time. The text is the same; this writes it with
    one ``write`` instead of many. With ``cls=`` or ``default=``, or for anything the C encoder
    refuses, the plain ``json.dump`` runs instead, so an error comes out exactly as it would
    (half a document written, then the same exception).
    """
    if cls is None and default is None:
        try:
            text = json.dumps(obj, **kw)
        except (TypeError, ValueError, RecursionError):
            text = None
        if text is not None:
            fp.write(text)
            return
    _PLAIN_DUMP(obj, fp, cls=cls, default=default, **kw)


@contextlib.contextmanager
def _json_dump_at_once():
    """Level 4 grades what resume writes, not how its bytes reach the file (levels 1 to 3 did)."""
    json.dump = _dump_at_once
    try:
        yield
    finally:
        json.dump = _PLAIN_DUMP


def run_resume(resume: Callable, scenario: Scenario, files: dict, carried: Iterable[tuple], *,
               checkpoint_error: type = Exception, directory: str = "checkpoints",
               timeout: Optional[float] = 20, watch: bool = True, received: int = 0,
               crash_again: bool = False) -> _Outcome:
    """Rebuild ``files`` in a fresh folder and run ``resume`` there once. ``crash_again``: record resume's own
    file operations and see what a second crash among them would leave (:func:`_torn_by_a_second_crash`)."""
    outcome = _Outcome()
    # Resume runs hundreds of times per test, writing and renaming tens of KiB each time: in memory
    # (scratch_root) that takes milliseconds. Durability is not graded here.
    with tempfile.TemporaryDirectory(prefix="crashcourse-resume-", dir=scratch_root()) as work:
        work = os.path.realpath(work)
        directory = folder_in(work, directory)
        folder = os.path.join(work, directory)
        lay_out(folder, files, within=work)  # plain names inside the folder only (grader.engine.layout)
        model = outcome.model = ResumedModel(scenario, received)
        tools = outcome.tools = KeyedTools(scenario, carried, model.renamed)
        path = os.path.join(folder, CHECKPOINT_NAME)
        if watch:
            call_model = _watch_disk(path, outcome, model, tools)
        else:
            def call_model(**kwargs: Any) -> dict:
                outcome.model_calls += 1
                return model(**kwargs)
        # Resume's own saves are recorded, to crash them too: a save written in place leaves the only copy
        # of the task empty or torn if the process is killed again during the resume.
        recorder = Recorder(watch=[work], namespaces=namespaces_of(resume)) if crash_again else contextlib.nullcontext()
        with working_in(work), _free_fsync(), _json_dump_at_once():
            try:
                with time_limit(timeout, owner=resume), recorder:
                    outcome.returned = resume(copy.deepcopy(scenario.tools), call_model, tools, directory)
            except checkpoint_error as exc:
                outcome.refused = exc
            except LoopTimeout as exc:  # stuck here (LoopTimeout), or refused as stuck before (KnownHang)
                outcome.error, outcome.error_type, outcome.stuck = str(exc), type(exc).__name__, exc.hang
            except BaseException as exc:  # noqa: BLE001 - a student's resume may raise anything; report it
                if isinstance(exc, KeyboardInterrupt):
                    raise
                outcome.error, outcome.error_type = short_traceback(exc), type(exc).__name__
        outcome.after = read_or_none(path)
        if isinstance(recorder, Recorder) and outcome.stuck is None:
            outcome.torn = (_unseen_saves(recorder.unseen) if recorder.unseen else
                            _torn_by_a_second_crash(recorder, folder))
    return outcome


def _kind_of(raw: Optional[bytes]) -> tuple:
    """What a resume from ``raw`` has to do: whether a call is pending, and who spoke last."""
    try:
        data = _parse(raw) if raw else None
        last = data["messages"][-1]
        return (data.get("pendingToolUse") is not None, last.get("role"), isinstance(last.get("content"), str))
    except (ValueError, RecursionError, TypeError, KeyError, IndexError, AttributeError):
        return ()


def _unseen_saves(unseen: list) -> str:
    """SAVED, for a resume whose saves reached the disk by a route the recorder does not follow: what a
    second crash among them would leave cannot be worked out, so they cannot be trusted."""
    return (f"resume_agent changed its files by a route the grader could not follow ({unseen[0]}), so what a "
            "second crash during its saves would leave cannot be checked. Save with Python's own file calls "
            "(open, os.replace): a temp file beside checkpoint.json, then a rename")


def _torn_by_a_second_crash(recorder: Recorder, folder: str) -> Optional[str]:
    """What a kill between two of resume's own file operations could leave of a whole checkpoint.json
    (empty, torn, or gone), or None when every such crash leaves a whole one."""
    ops = recorder.ops
    start = os.path.join(folder, CHECKPOINT_NAME)
    if not isinstance(recorder.initial.get(start), bytes):
        return None  # resume started with no file to lose (it had to refuse it, or start afresh)
    seen: dict = {}
    for state in crash_states(ops, recorder.initial, folder, CHECKPOINT_NAME, ("M1",), recorder.initial_dirs):
        raw = state.files.get(CHECKPOINT_NAME)
        if raw not in seen:
            try:
                seen[raw] = raw is not None and isinstance(_parse(raw), dict)
            except (ValueError, RecursionError):
                seen[raw] = False
        if not seen[raw]:
            left = "no checkpoint.json at all" if raw is None else f"checkpoint.json holding {describe_bytes(raw)}"
            when = (f"in the middle of {ops[state.point].describe()}" if state.torn is not None else
                    f"after {ops[state.point - 1].describe()}")
            return (f"killed again while resume_agent was saving ({when}), "
                    f"the folder would hold {left}: a second crash during the resume loses the task. Resume's "
                    "own saves must be as safe as the loop's: a temp file beside checkpoint.json, then a rename")
    return None


# -- judging one outcome ---------------------------------------------------------------------------------

def _tool_results(messages: list) -> dict:
    out = {}
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    out[block.get("tool_use_id")] = block
    return out


def _is_interrupted_result(block: Any) -> bool:
    if not isinstance(block, dict) or block.get("is_error") is not True:
        return False
    content = block.get("content")
    if isinstance(content, list):
        content = " ".join(b.get("text", "") for b in content if isinstance(b, dict))
    return isinstance(content, str) and bool(content.strip())


def matches_under_policy(got: dict, want: dict, pending_id: Optional[str]) -> bool:
    """``got`` equals ``want``, or differs only in answering ``pending_id`` with an interrupted error."""
    if got == want:
        return True
    if pending_id is None or set(got) != set(want) or len(got["messages"]) != len(want["messages"]):
        return False
    for key in FIELDS:
        if key != "messages" and got[key] != want[key]:
            return False
    for g, w in zip(got["messages"], want["messages"]):
        if g == w:
            continue
        results_g, results_w = _tool_results([g]), _tool_results([w])
        if set(results_g) != {pending_id} or set(results_w) != {pending_id} or g.get("role") != w.get("role"):
            return False
        if not _is_interrupted_result(results_g[pending_id]):
            return False
    return True


def _describe_file(raw: Optional[bytes]) -> str:
    if raw is None:
        return "no checkpoint.json"
    try:
        data = json.loads(raw)
        pending = data.get("pendingToolUse")
        what = f"pendingToolUse `{pending.get('name')}`" if isinstance(pending, dict) else "nothing pending"
        return f"checkpoint.json with turns={data.get('turns')}, tokensUsed={data.get('tokensUsed')}, {what}"
    except (ValueError, RecursionError, AttributeError, TypeError):
        return f"checkpoint.json holding {describe_bytes(raw)}"


def _describe_outcome(outcome: _Outcome) -> str:
    if outcome.refused is not None:
        return f"raised {type(outcome.refused).__name__}: {outcome.refused}"
    if outcome.error is not None:
        return f"raised {outcome.error.splitlines()[0]}"
    state = outcome.returned
    if not isinstance(state, dict):
        return f"returned {type(state).__name__}"
    try:
        pending = state.get("pendingToolUse")
        return (f"returned turns={state.get('turns')}, tokensUsed={state.get('tokensUsed')}, "
                f"{len(state.get('messages') or [])} messages, pendingToolUse "
                f"{json.dumps(pending)[:60] if pending else 'null'}")
    except (TypeError, ValueError):
        return "returned a state that cannot be shown"


def judge(outcome: _Outcome, raw: Optional[bytes], want: Optional[dict], scenario: Scenario,
          ) -> Optional[tuple[str, str]]:
    """``(check, detail)`` for the first thing ``outcome`` got wrong, or None (see :func:`judge_all`)."""
    findings = judge_all(outcome, raw, want, scenario)
    return findings[0] if findings else None


def judge_all(outcome: _Outcome, raw: Optional[bytes], want: Optional[dict], scenario: Scenario,
              ) -> list[tuple[str, str]]:
    """``(check, detail)`` for each check ``outcome`` broke (each check once), in the order of :data:`CHECKS`.

    ``want`` is the final state expected (None: the file cannot be trusted, so resume must refuse).
    The checks are judged independently where they can be: a resume that restarts its counters
    fails COUNTS, not RESUME too. A resume that raised can only be judged on why it raised.
    """
    if want is None:
        refusal = _judge_refusal(outcome, raw)
        return [refusal] if refusal else []
    broken = _judge_return(outcome, raw)
    if broken is not None:
        return [broken]
    got = _as_saved(outcome.returned, outcome.after)
    if got is None:
        try:
            got = snapshot(outcome.returned)
        except (TypeError, ValueError) as exc:
            return [("RESUME", f"the returned state cannot be written as JSON: {exc}")]
    judged = _Judged(outcome, got, want, _parse(raw), scenario)
    found = [f for f in (judge(judged) for judge in _JUDGES) if f is not None]
    order = list(CHECKS)
    return sorted(found, key=lambda f: order.index(f[0]))


def _judge_refusal(outcome: _Outcome, raw: Optional[bytes]) -> Optional[tuple[str, str]]:
    """REFUSE, for a file resume cannot trust: it must raise CheckpointError with a reason, before
    calling anything, and leave the file as it was."""
    if outcome.refused is None:
        got = "returned" if outcome.error is None else f"raised {outcome.error_type}, not CheckpointError"
        return ("REFUSE", f"there is no checkpoint resume can trust here, yet resume_agent {got}; raise "
                          "CheckpointError so the caller knows to start over (or to look at the file)")
    if not str(outcome.refused).strip():
        return ("REFUSE", "CheckpointError was raised with no message; say what is wrong with which file")
    if outcome.model_calls or (outcome.tools and outcome.tools.calls):
        return ("REFUSE", "resume called the model or a tool before deciding the file could not be trusted")
    if outcome.after != raw:
        return ("REFUSE", "resume changed or removed the file it refused: that was the only evidence of the run")
    return None


# Told when resume asks the model again after a finished task; its cause is "finished-asked-again".
FINISHED_ASKED_AGAIN = ("the file holds a finished task (its last message is the model's final answer and nothing "
                        "is pending), yet resume_agent called the model again, which the API refuses for a "
                        "conversation that ends on the assistant's message: when the task is done there is nothing "
                        "to resume, so return the state as it is")


def _finished(raw: Optional[bytes]) -> bool:
    """The checkpoint holds a finished task: its last message is the model's answer, nothing pending."""
    try:
        data = _parse(raw)
        return data["pendingToolUse"] is None and data["messages"][-1]["role"] == "assistant"
    except Exception:  # noqa: BLE001 - any file that is not such a save
        return False


def _judge_return(outcome: _Outcome, raw: Optional[bytes] = None) -> Optional[tuple[str, str]]:
    """Why a resume of a trustworthy file gave no final state to judge (it refused, raised, or returned
    something else), or None."""
    if outcome.refused is not None:
        return ("RESUME", f"the file is a whole save a correct loop writes, yet resume refused it ({outcome.refused})")
    if outcome.error is not None:
        if outcome.error_type == "ScriptedModelError" and "tool_result" in outcome.error:
            return ("PAIRING", "the model was sent a transcript the API refuses: "
                               + outcome.error.splitlines()[0].split(": ", 1)[-1])
        if outcome.error_type == "ScriptedModelError" and outcome.model_calls and _finished(raw):
            # The model's error only says the request ended on its own message; the cause is the file.
            return ("RESUME", FINISHED_ASKED_AGAIN)
        return ("RESUME", f"resume_agent raised {outcome.error.splitlines()[0]}")
    state = outcome.returned
    if not isinstance(state, dict) or any(k not in state for k in FIELDS):
        return ("RESUME", "resume_agent should return the final state: a dict with the six protocol fields")
    return None


class _Judged(NamedTuple):
    """A resume that returned a state: what each check of :data:`_JUDGES` reads."""

    outcome: _Outcome
    got: dict          # the state it returned, as saved
    want: dict         # the final state the run should end in
    file_data: dict    # the checkpoint it resumed from
    scenario: Scenario


def _judge_pairing(j: _Judged) -> Optional[tuple[str, str]]:
    try:
        check_messages(j.got["messages"])
    except ScriptedModelError as exc:
        return ("PAIRING", f"the returned transcript would be refused by the API: {exc}")
    return None


def _judge_once(j: _Judged) -> Optional[tuple[str, str]]:
    """ONCE: the first non-idempotent tool that took effect twice, and whether the file could have said."""
    tools, file_data = j.outcome.tools, j.file_data
    traces = set(_tool_results(file_data.get("messages") or []))
    if isinstance(file_data.get("pendingToolUse"), dict):
        traces.add(file_data["pendingToolUse"].get("id"))
    twice = next((b for r in j.scenario.responses for b in tool_use_blocks(r.get("content"))
                  if b["name"] in j.scenario.non_idempotent and tools.runs_of(b["id"]) > 1), None)
    if twice is None:
        return None
    runs = f"`{twice['name']}` ({twice['id']}) took effect {tools.runs_of(twice['id'])} times"
    if twice["id"] not in traces:
        return ("ONCE", f"{runs}: it had started before the crash, but the checkpoint holds no trace "
                        "of it (no pendingToolUse, no result), so resume asked the model again and the "
                        "model asked for it again, under a new id. No resume can know; only a save at "
                        "point A, before the tool runs, would have told it")
    if twice["id"] in _tool_results(file_data.get("messages") or []):
        # Its result was on disk: the call had finished, and advice about pending calls would mislead.
        return ("ONCE", f"{runs}: once before the crash and again on resume, though its result was already "
                        "in the checkpoint's messages: the call had finished. Run on resume only the call "
                        "pendingToolUse names, never one whose result is recorded")
    return ("ONCE", f"{runs}: once before the crash and again on resume. Re-run a pending call "
                    "under its tool_use id (execute_tool(..., tool_use_id=id)), or answer it with "
                    "an error result")


def _tokens_went_wrong(got: int, want: int, file_data: Any) -> str:
    """Why a resumed run's tokensUsed is off, read from where it started (the file's count) and what it added."""
    start = file_data.get("tokensUsed") if isinstance(file_data, dict) else None
    if type(start) is not int or type(got) is not int:
        return "continue from the file's count and add each new response's"
    due = want - start   # what the responses resume received spent
    if got == due and start:
        return (f"that is the spend of the responses resume received alone: it started from 0, not from the "
                f"file's {start}")
    added = got - start
    if 0 < added < due:
        return (f"it went on from the file's {start}, but added {added} for the responses resume received, which "
                f"spent {due}: add each response's input, output and both cache counts")
    if added > due > 0:
        return (f"it went on from the file's {start}, but added {added} for the responses resume received, which "
                f"spent {due}: is a response counted twice?")
    return "continue from the file's count and add each new response's"


def _judge_counts(j: _Judged) -> Optional[tuple[str, str]]:
    got, want = j.got, j.want
    results = len(_tool_results(got["messages"]))
    if got["turns"] != want["turns"] or got["turns"] != results:
        return ("COUNTS", f"turns ends at {got['turns']} ({results} tool result{'s' if results != 1 else ''} in messages), but the run "
                          f"takes {want['turns']}: {_turns_went_wrong(got['turns'], results, j.file_data)}")
    if got["tokensUsed"] != want["tokensUsed"]:
        return ("COUNTS", f"tokensUsed ends at {got['tokensUsed']}, but the responses in the transcript spent "
                          f"{want['tokensUsed']}: {_tokens_went_wrong(got['tokensUsed'], want['tokensUsed'], j.file_data)}")
    return None


def _judge_resume(j: _Judged) -> Optional[tuple[str, str]]:
    """RESUME: the state returned is the run's final one (ids the model gave again renamed; the counters
    are COUNTS' business)."""
    want = j.want
    if j.outcome.model is not None and j.outcome.model.renamed:
        text = json.dumps(want)
        for new, old in j.outcome.model.renamed.items():
            text = text.replace(json.dumps(old), json.dumps(new))
        want = json.loads(text)  # the calls asked for again carry the new ids
    pending = j.file_data.get("pendingToolUse")
    counters = {"turns": want["turns"], "tokensUsed": want["tokensUsed"]}  # COUNTS' business, not RESUME's
    if not matches_under_policy(dict(j.got, **counters), want, pending.get("id") if isinstance(pending, dict) else None):
        return ("RESUME", _difference(j.got, want))
    return None


def _judge_saved(j: _Judged) -> Optional[tuple[str, str]]:
    if j.outcome.unsaved:
        return ("SAVED", j.outcome.unsaved)
    if j.outcome.torn:
        return ("SAVED", j.outcome.torn)
    if j.outcome.after is None or _parse(j.outcome.after) != j.got:
        return ("SAVED", "after resume_agent returned, checkpoint.json does not hold the state it returned")
    return None


# One judge per check a resume that returned a state can break (each returns (check, detail) or None).
_JUDGES = (_judge_pairing, _judge_once, _judge_counts, _judge_resume, _judge_saved)


def _as_saved(state: dict, after: Optional[bytes]) -> Optional[dict]:
    """``snapshot(state)`` without the JSON round trip, when the file resume left holds exactly the
    state it returned (what a correct resume does), else None (see checkpoint.exactly_saved). The
    value returned is shared with the file's cached decoding: read it, never change it."""
    if not after:
        return None
    try:
        data = _parse(after)
    except ValueError:
        return None
    if not isinstance(data, dict) or any(key not in data for key in FIELDS):
        return None
    return exactly_saved(state, {key: data[key] for key in FIELDS})


def _difference(got: dict, want: dict) -> str:
    """Where ``got`` first parts from ``want``, in words: the first key or item that differs, and in
    it the first character that differs, with the same context shown on both sides."""
    for key in FIELDS:
        if key != "messages" and key not in ("turns", "tokensUsed") and got[key] != want[key]:
            where, have, should = first_difference(got[key], want[key], f"`{key}`")
            return f"{where} ends as {have}, but an uncrashed run ends with {should}"
    gm, wm = got["messages"], want["messages"]
    for i, (g, w) in enumerate(zip(gm, wm)):
        if g != w:
            where, have, should = first_difference(g, w, f"messages[{i}]")
            return (f"{where} is {have}, but an uncrashed run has {should} there "
                    "(a pending call may be answered by an error tool_result instead, and nothing else may differ)")
    return (f"the transcript has {len(gm)} messages, but an uncrashed run ends with {len(wm)}"
            + (": was the model's final answer left out?" if len(gm) < len(wm) else ""))


def _turns_went_wrong(turns: Any, results: int, file_data: dict) -> str:
    """Why the resumed ``turns`` is off, told from the file: counted from zero (it equals the results
    resume added itself), the reconciled pending call left out, or counted on by the wrong amount.
    Where two readings give the same number, both are put as a question."""
    before = file_data.get("turns")
    if not isinstance(turns, int) or not isinstance(before, int) or isinstance(before, bool):
        return "did it restart at zero instead of continuing from the file?"
    added = results - len(_tool_results(file_data.get("messages") or []))
    restarted = bool(before) and turns == added
    short = isinstance(file_data.get("pendingToolUse"), dict) and turns == before + added - 1
    told = (f"the file said turns = {before}{' with a call pending' if short else ''}, and resume added {added} "
            f"tool result{'s' if added != 1 else ''}")
    if restarted and short:
        return (f"{told}, but turns ended at {turns}: did it restart at zero, or leave the pending call it "
                "answered uncounted?")
    if restarted:
        return f"{told}, and turns counts only those: did it restart at zero instead of continuing from the file?"
    if short:
        return f"{told}, but turns went up by {turns - before}: is the pending call it answered counted as a turn?"
    return (f"{told}, but turns went up by {turns - before}: does each result resume records count exactly "
            "once?")


_ABSENT = object()


def first_difference(got: Any, want: Any, path: str, context: int = 30) -> tuple[str, str, str]:
    """(where, got, want): the path of the first key or item at which two JSON values differ, and
    each side's text cut around the first character that differs (so two long values that share a
    prefix do not print as the same cut-off text)."""
    while True:
        if isinstance(got, dict) and isinstance(want, dict):
            key = next((k for k in list(want) + [k for k in got if k not in want]
                        if got.get(k, _ABSENT) != want.get(k, _ABSENT)), None)
            if key is None:
                break
            path, got, want = f"{path}[{json.dumps(key)}]", got.get(key, _ABSENT), want.get(key, _ABSENT)
        elif isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
            i = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
            path, got, want = f"{path}[{i}]", got[i], want[i]
        else:
            break
    if got is _ABSENT or want is _ABSENT:
        shown = [("no such key" if v is _ABSENT else _cut(json.dumps(v), 0, 2 * context)) for v in (got, want)]
        return path, shown[0], shown[1]
    # Letters as they are (ü, not \u00fc): the learner reads the text, and a cut cannot split them.
    g, w = json.dumps(got, ensure_ascii=False), json.dumps(want, ensure_ascii=False)
    at = next((i for i, (a, b) in enumerate(zip(g, w)) if a != b), min(len(g), len(w)))
    start = max(0, at - context)
    position = at - 1 if isinstance(got, str) and isinstance(want, str) else at  # not counting the quote
    where = path if at < context else f"{path}, from character {position} on,"
    return where, _cut(g, start, at + context), _cut(w, start, at + context)


def _cut(text: str, start: int, end: int) -> str:
    start, end = _outside_escape(text, start), _outside_escape(text, end)
    return ("…" if start > 0 else "") + text[start:end] + ("…" if end < len(text) else "")


def _outside_escape(text: str, i: int) -> int:
    """``i``, or the end of the JSON escape (``\\n``, ``\\u0007``) it falls inside, so no cut splits one."""
    i = min(i, len(text))
    for back in range(1, 6):
        b = i - back
        if b < 0:
            break
        if text[b] == "\\" and _escaped(text, b):
            size = 6 if text[b + 1:b + 2] == "u" else 2
            return b + size if b + size > i else i
    return i


def _escaped(text: str, b: int) -> bool:
    """Whether the backslash at ``b`` starts an escape (an even run of backslashes before it)."""
    run = 0
    while b - run - 1 >= 0 and text[b - run - 1] == "\\":
        run += 1
    return run % 2 == 0


# -- one crash state, resumed in a process that never saw the run -----------------------------------------

@dataclass
class Resumed:
    """What resume made of one crash state, as plain data (it comes back from a fresh process)."""

    findings: list                  # (check, detail) for each check broken, as judge_all gives them
    did: str                        # what resume did, in words
    refused: Optional[str] = None   # the message of the CheckpointError it raised
    error: Optional[str] = None     # what it raised otherwise, or where it got stuck
    error_type: str = ""
    stuck: Optional[Hang] = None
    runs: dict = field(default_factory=dict)   # the script's tool_use id -> how many times it took effect


def _resume_and_judge(resume: Callable, checkpoint_error: type, scenario: Scenario, files: dict, carried: list,
                      raw: Optional[bytes], want: Optional[dict], directory: str, timeout: Optional[float],
                      received: int, watch: bool, crash_again: bool = False) -> Resumed:
    """Run ``resume`` once on ``files`` (:func:`run_resume`) and judge it against ``want`` (:func:`judge_all`)."""
    outcome = run_resume(resume, scenario, files, carried, checkpoint_error=checkpoint_error, directory=directory,
                         timeout=timeout, watch=watch, received=received, crash_again=crash_again)
    if outcome.stuck is not None:
        return Resumed([], "", error=outcome.error, error_type=outcome.error_type, stuck=outcome.stuck)
    findings = judge_all(outcome, raw, want, scenario)
    blocks = [b for r in scenario.responses for b in tool_use_blocks(r.get("content"))]
    runs = {b["id"]: outcome.tools.runs_of(b["id"]) for b in blocks} if outcome.tools is not None else {}
    return Resumed(findings, _describe_outcome(outcome), None if outcome.refused is None else str(outcome.refused),
                   outcome.error, outcome.error_type, None, runs)


def resume_once(resume: Callable, scenario: Scenario, files: dict, carried: Iterable[tuple], raw: Optional[bytes],
                want: Optional[dict], *, checkpoint_error: type = Exception, directory: str = "checkpoints",
                timeout: Optional[float] = 20, received: int = 0, watch: bool = True,
                settings: Optional[dict] = None) -> Resumed:
    """Resume from one crash state and judge what resume did: the one step every check of this level takes.

    After a real crash only the files are left, so ``resume`` runs in a process that never saw the
    crashed run nor any earlier crash state (:func:`grader.engine.fresh.run_fresh`): what it
    remembered in memory is gone, as it would be. ``settings``: module-level values for that fresh
    copy of the learner's module (``MAX_TURNS``).
    """
    call = _resume_call(resume, scenario, files, carried, raw, want, checkpoint_error=checkpoint_error,
                        directory=directory, timeout=timeout, received=received, watch=watch, settings=settings)
    return _resumed(*next(run_fresh_each([call])), raw, want, scenario)


def _resume_call(resume: Callable, scenario: Scenario, files: dict, carried: Iterable[tuple], raw: Optional[bytes],
                 want: Optional[dict], *, checkpoint_error: type, directory: str, timeout: Optional[float],
                 received: int, watch: bool = True, settings: Optional[dict] = None,
                 crash_again: bool = False) -> FreshCall:
    return FreshCall(_resume_and_judge, resume, (checkpoint_error, scenario, dict(files), list(carried), raw, want,
                                            directory, timeout, received, watch, crash_again),
                     settings=settings, timeout=timeout)


def _resumed(value: Optional[Resumed], died: Optional[FreshProcessDied], raw: Optional[bytes],
             want: Optional[dict], scenario: Scenario) -> Resumed:
    """What :func:`resume_once` gives for one answer of a fresh process (or for its death)."""
    if died is None:
        return value
    outcome = _Outcome(error=f"SystemExit: it ended the process it ran in ({died})", error_type="SystemExit")
    return Resumed(judge_all(outcome, raw, want, scenario), _describe_outcome(outcome), error=outcome.error,
                   error_type=outcome.error_type)


# -- files resume must refuse ------------------------------------------------------------------------------

def untrustworthy_files(scenario: Scenario) -> list[tuple[str, Optional[bytes]]]:
    """``(what is wrong, bytes)`` of checkpoints resume must refuse (None: no file at all)."""
    saves = reference_saves(scenario.task, scenario.responses, scenario.results)
    a_save = next((s for label, s in saves if label == "A"), saves[0][1])
    whole = json.dumps(a_save).encode("utf-8")

    def edited(**changes: Any) -> bytes:
        data = dict(a_save)
        for key, value in changes.items():
            if value is _DROP:
                data.pop(key)
            else:
                data[key] = value
        return json.dumps(data).encode("utf-8")

    return [
        ("there is no checkpoint.json", None),
        ("checkpoint.json is empty (0 bytes)", b""),
        ("checkpoint.json is torn: it stops two thirds of the way through", whole[: 2 * len(whole) // 3]),
        ("checkpoint.json holds a JSON list, not an object", b"[1, 2, 3]"),
        ("checkpoint.json is not UTF-8", b'{"version": 1, "task": "\xff\xfe"}'),
        ("`version` is 2, a format this resume does not know", edited(version=2)),
        ("`version` is missing", edited(version=_DROP)),
        ("`version` is true, not the number 1 (True == 1 in Python, not in the protocol)", edited(version=True)),
        ("`version` is 1.0, a float, not the int 1", edited(version=1.0)),
        ("`turns` is the string \"1\", not a number", edited(turns="1")),
        # isinstance(True, int) holds in Python: a type check that forgets bool lets JSON's true count as 1.
        ("`turns` is true, not a number (JSON's true is a boolean, though isinstance(True, int) holds)",
         edited(turns=True)),
        ("`messages` is missing", edited(messages=_DROP)),
        ("`pendingToolUse` is a list, not null or an object", edited(pendingToolUse=[])),
    ]


_DROP = object()


def check_refusals(resume: Callable, scenario: Scenario, *, checkpoint_error: type,
                   directory: str = "checkpoints", timeout: Optional[float] = 20) -> list[str]:
    """What resume got wrong on each file of :func:`untrustworthy_files` (empty: nothing)."""
    problems = []
    files = untrustworthy_files(scenario)
    answers = run_fresh_each(_resume_call(resume, scenario, {} if raw is None else {CHECKPOINT_NAME: raw}, (), raw,
                                          None, checkpoint_error=checkpoint_error, directory=directory,
                                          timeout=timeout, received=0, watch=False)
                             for _what, raw in files)
    for what, raw in files:
        resumed = _resumed(*next(answers), raw, None, scenario)
        if resumed.stuck is not None:
            # One stuck resume says all there is to say: the other files would only wait as long. Only a
            # resume stopped on this very file is pinned on it; one refused as stuck before is not.
            if resumed.error_type == "KnownHang":
                return [resumed.error]
            first, _, rest = resumed.error.partition("\n")
            return [f"{first}\n  It had been given a checkpoint it should refuse: {what}.\n{rest}"]
        finding = resumed.findings[0] if resumed.findings else None
        if finding is None and "version" in what and "2" in what and "2" not in str(resumed.refused):
            finding = ("REFUSE", "the message should name the version found (2), so the user knows which "
                                 "format the file is in")
        if finding is not None:
            detail = _sentence(finding[1])
            problems.append(f"{what}: resume_agent {_sentence(resumed.did)} {detail[:1].upper()}{detail[1:]}")
    return problems


class CapProblem(str):
    """One line of :func:`check_turn_cap`'s answer, with the cause the trace shows (a key of
    :data:`grader.engine.invariants.CAUSES`, or "")."""

    cause: str = ""


@dataclass
class _CapCheck:
    """One turn-cap check: resume from saves of a correct run with ``MAX_TURNS = cap``."""

    resume: Callable
    module: Any
    scenario: Scenario
    cap: int
    checkpoint_error: type
    directory: str
    timeout: Optional[float]

    @property
    def blocks(self) -> list:
        return [b for r in self.scenario.responses for b in tool_use_blocks(r.get("content"))]

    def resume_from(self, raw: bytes, carried: list, want: dict, cap: int) -> Resumed:
        """Resume from ``raw`` with ``MAX_TURNS = cap`` (set in the fresh module, and in ``module`` for a
        resume that runs here or in the sandbox)."""
        old = self.module.MAX_TURNS
        self.module.MAX_TURNS = cap
        try:
            return resume_once(self.resume, self.scenario, {CHECKPOINT_NAME: raw}, carried, raw, want,
                               checkpoint_error=self.checkpoint_error, directory=self.directory,
                               timeout=self.timeout, settings={"MAX_TURNS": cap})
        finally:
            self.module.MAX_TURNS = old

    def last_turn_run(self, resumed: Resumed) -> int:
        """The number of the last tool turn whose call resume ran (0: none)."""
        return max((i + 1 for i, b in enumerate(self.blocks) if resumed.runs.get(b["id"])), default=0)

    def past_the_cap(self, raw: bytes, carried: list, want: dict, label: str, begun: int,
                     resumed: Resumed) -> CapProblem:
        """Why resume ran past the cap, told apart by one more resume from the same file with a cap one
        lower: a loop that counts from zero stops one turn earlier, a loop with no cap check runs just as far."""
        cap = self.cap
        last = self.last_turn_run(resumed)
        ran_here = last - begun   # turns this resume began itself (a pending call is answered, not begun)
        lower = self.last_turn_run(self.resume_from(raw, carried, want, cap - 1)) if cap > 1 else None
        name = self.blocks[cap]["name"]
        head = (f"CAP broken: {CHECKS['CAP']}.\n  Resuming from save {label} of turn {begun} with MAX_TURNS = {cap}, "
                f"your resume_agent ran `{name}`, turn {cap + 1}: one turn past the cap.")
        pending = ", and a call pending" if label == "A" else ""
        disk = (f"  On disk: checkpoint.json said turns = {json.loads(raw)['turns']}{pending}: {begun} of the {cap} "
                f"turns the task may take {'was' if begun == 1 else 'were'} already begun before the crash.")
        if lower is not None and lower == last:
            problem = CapProblem("\n".join([
                head, disk,
                f"  What resume did: it went on to turn {last}, and with MAX_TURNS = {cap - 1} it went just as far, "
                "so the loop never stops at the cap: nothing compares the turn count with MAX_TURNS, or the "
                "comparison reads a copy taken before the grader set it.",
                "  What to try: where in your loop does it check the cap before calling the model again, and does "
                "that check read MAX_TURNS and the `turns` from the file?"]))
            problem.cause = "cap-not-enforced"
        elif label == "A" and json.loads(raw)["turns"] == 0:
            # The only turn begun before the crash is the pending call: a count from zero and a count that
            # leaves the answered call out stop at the same turn, so both are put to the learner.
            problem = CapProblem("\n".join([
                head, disk,
                f"  What resume did: it began {ran_here} turn{'s' if ran_here != 1 else ''} of its own after the "
                "crash, as many as a task that starts from nothing may take: its cap did not count the turn begun "
                "before the crash, the pending call it answered.",
                "  What to try: did the count restart at zero after the crash, or does answering the pending call "
                "add no turn? Compare the cap with `state[\"turns\"]`, which carries on from the file and counts "
                "every result recorded, not with a counter that starts in resume."]))
            problem.cause = "cap-restarted"
        else:
            problem = CapProblem("\n".join([
                head, disk,
                f"  What resume did: it began {ran_here} turn{'s' if ran_here != 1 else ''} of its own after the "
                f"crash, as many as a task that starts from nothing may take, so its cap counted from zero and "
                "forgot the turns already in the file.",
                "  What to try: did the count restart at zero after the crash? Compare the cap with "
                "`state[\"turns\"]`, which carries on from the file, not with a counter that starts in resume."]))
            problem.cause = "cap-restarted"
        return problem


def check_turn_cap(resume: Callable, module: Any, scenario: Scenario, cap: int, *, checkpoint_error: type,
                   directory: str = "checkpoints", timeout: Optional[float] = 20) -> list[str]:
    """Set ``module.MAX_TURNS = cap``; resume from each crash state with at most ``cap`` turns begun.

    Each resume must end with exactly ``cap`` tool results (the uncrashed run's B save of turn ``cap``,
    up to the reconciliation policy), never run the tool of turn ``cap + 1``, and send the API only
    what it accepts.
    """
    if not hasattr(module, "MAX_TURNS"):
        return ["resume.py has no module-level MAX_TURNS; the grader sets it to test the turn cap"]
    saves = reference_saves(scenario.task, scenario.responses, scenario.results)
    b_saves = [s for label, s in saves if label == "B"]
    if cap < 1 or cap >= len(b_saves):
        raise ValueError(f"choose a cap between 1 and {len(b_saves) - 1} for {scenario.name}")
    want = b_saves[cap - 1]
    check = _CapCheck(resume, module, scenario, cap, checkpoint_error, directory, timeout)
    blocks = check.blocks
    for label, save in saves:
        begun = save["turns"] + (1 if save["pendingToolUse"] else 0)
        if label == "final" or begun > cap:
            continue
        for started in sorted({save["turns"], begun}):
            raw = json.dumps(save).encode("utf-8")
            carried = [(b["id"], b["name"], b["input"]) for b in blocks[:started]]
            resumed = check.resume_from(raw, carried, want, cap)
            if resumed.stuck is not None:
                return [resumed.error]
            if any(resumed.runs.get(b["id"]) for b in blocks[cap:]):
                return [check.past_the_cap(raw, carried, want, label, begun, resumed)]
            if resumed.findings:
                check_id, detail = resumed.findings[0]
                # The cap itself may hold: another check broke first, and the headline must not claim
                # the cap was overshot (a spend counted twice, say, is COUNTS, not a cap counted wrong).
                return [CapProblem("\n".join([
                    f"CAP not judged: resuming under a turn cap broke {check_id} first, so whether {CHECKS['CAP']} "
                    "cannot be told yet.",
                    f"  Resuming from save {label} of turn {begun} with MAX_TURNS = {cap}, your resume_agent "
                    f"{_sentence(resumed.did)}",
                    f"  On disk: {_sentence(_describe_file(raw))}",
                    f"  What is wrong: {check_id} broken: {_sentence(detail)}",
                    "  What to try: this check resumes from the saves of a correct run, so whatever tasks 1 to 4 "
                    "report goes wrong here too; make those pass, then see whether the cap holds."]))]
    return []


# -- the pipeline: record a correct run, crash it at every point, resume from each state ------------------

@dataclass
class CrashedRun:
    """A correct writer's run, recorded once, and the crash states it can leave."""

    scenario: Scenario
    ops: list
    initial: Any
    initial_dirs: Any
    folder: str          # the checkpoint folder the run wrote (its crash states are laid out like it)
    final: dict          # the state the uncrashed run ends with
    windows: list        # each crash point in the loop's words

    @classmethod
    def record(cls, writer: Callable, scenario: Scenario, directory: str = "checkpoints",
               timeout: Optional[float] = 20) -> "tuple[Optional[CrashedRun], Optional[str]]":
        """The run, or None and why it failed (a grader problem: the writers are the kit's)."""
        with tempfile.TemporaryDirectory(prefix="crashcourse-crashed-", dir=scratch_root()) as work:
            work = os.path.realpath(work)
            recorder, returned, error, _ = record_run(writer, scenario, work, folder_in(work, directory),
                                                      timeout=timeout)
        if error is not None:
            return None, error
        ops = recorder.ops
        return cls(scenario, ops, recorder.initial, recorder.initial_dirs,
                   os.path.join(work, folder_in(work, directory)), snapshot(returned),
                   windows_for(ops, scenario.task)), None

    def resumed(self, resume: Callable, *, checkpoint_error: type, models: Iterable[str] = ("M1",),
                directory: str = "checkpoints", timeout: Optional[float] = 20) -> Iterator[tuple]:
        """``(state, raw, resumed, first)`` for every crash state: what ``checkpoint.json`` held, and what
        ``resume`` made of it (:func:`resume_once`). A situation met before is resumed once (``first``
        is True that time): the same checkpoint bytes, the same other files beside it (a leftover temp
        file, whatever its bytes), the same calls started and responses received."""
        scenario = self.scenario
        blocks = [b for r in scenario.responses for b in tool_use_blocks(r.get("content"))]
        starts, received = [0], [0]
        for op in self.ops:
            starts.append(starts[-1] + (op.kind == "tool_start"))
            received.append(received[-1] + (op.kind == "model_end"))
        # Every state is listed first, so the resumes of new situations can run side by side, each in a
        # fresh process of its own (run_fresh_each), and still come back in order.
        listed, keys, calls, kinds = [], set(), [], set()
        for state in crash_states(self.ops, self.initial, self.folder, CHECKPOINT_NAME, tuple(models),
                                  self.initial_dirs):
            started = starts[state.point]
            raw = state.read(CHECKPOINT_NAME)
            key = (raw, tuple(sorted(n for n in state.files if n != CHECKPOINT_NAME)), started, received[state.point])
            first = key not in keys
            want = self.final if raw is not None else None
            listed.append((state, raw, want, key, first))
            if first:
                keys.add(key)
                carried = [(b["id"], b["name"], b["input"]) for b in blocks[:started]]
                # Resume's own saves are crashed too, on the first state of each kind (a call pending, none,
                # the task finished): recording every resume would cost a tenth more, and code that saves
                # in place does so whatever it resumes from.
                kind = _kind_of(raw)
                calls.append(_resume_call(resume, scenario, state.files, carried, raw, want,
                                          checkpoint_error=checkpoint_error, directory=directory, timeout=timeout,
                                          received=received[state.point], crash_again=kind not in kinds))
                kinds.add(kind)
        answers = run_fresh_each(calls)
        seen: dict = {}
        for state, raw, want, key, first in listed:
            if first:
                seen[key] = _resumed(*next(answers), raw, want, scenario)
            yield state, raw, seen[key], first


def explore_resume(resume: Callable, scenario: Scenario, *, checkpoint_error: type = Exception,
                   writer: Callable = reference_writer, models: Iterable[str] = ("M1",),
                   directory: str = "checkpoints", timeout: Optional[float] = 20,
                   max_failures: int = 100) -> ResumeExploration:
    """Crash ``writer`` on ``scenario`` at every point under ``models``; resume from each state with ``resume``."""
    result = ResumeExploration(scenario.name, getattr(writer, "__name__", "writer"))
    run, error = CrashedRun.record(writer, scenario, directory, timeout)
    if run is None:
        result.error = f"the crashed run itself failed (a grader problem, not yours): {error}"
        return result
    for state, raw, resumed, first in run.resumed(resume, checkpoint_error=checkpoint_error, models=models,
                                                  directory=directory, timeout=timeout):
        if not first:
            continue
        result.states += 1
        if resumed.stuck is not None:
            # Stuck (or refused, having got stuck before): every other state would only meet the same.
            result.error, result.stuck, result.failures = resumed.error, resumed.stuck, []
            break
        where = run.windows[state.point].words()
        if state.point:
            where += ", after " + run.ops[state.point - 1].describe()
        for check, detail in resumed.findings:
            if len(result.failures) < max_failures:
                result.failures.append(ResumeFailure(
                    check, where, state.model, _describe_file(raw), resumed.did, detail,
                    cause="finished-asked-again" if detail == FINISHED_ASKED_AGAIN else ""))
    return result


class ResumeLevel(LevelModule):
    """Level 4: a correct run crashed at each point, then resumed with the learner's ``resume_agent``."""

    namespace = "resume"

    def column(self, title: str, folder: Path, level: api.Level, seed: int = 0) -> Optional[api.Column]:
        """The pipeline of :func:`explore_resume`, kept per crash point so each row of the matrix can
        say what resume made of the file that crash left."""
        module, failed = self.import_file(title, folder, level)
        if failed is not None:
            return failed
        resume = getattr(module, level.function, None)
        error = getattr(module, "CheckpointError", None)
        if not callable(resume) or not (isinstance(error, type) and issubclass(error, Exception)):
            return api.failed_column(title, f"{level.files[0]} needs `{level.function}` and "
                                               "`class CheckpointError(Exception)`")
        cells = {c.id: c.cell for c in api.checks(self.namespace)}
        scenario = support_tickets(seed)
        run, err = CrashedRun.record(reference_writer, scenario)
        if run is None:
            return api.failed_column(title, f"the crashed run failed (a grader problem): {err}")
        col = api.Column(title, namespace=self.namespace, meaning=RESUME_COLUMN)
        for state, raw, resumed, first in run.resumed(resume, checkpoint_error=error, timeout=loop_timeout()):
            if resumed.stuck is not None:
                col.stuck = col.stuck or resumed.stuck
                found = [("STUCK", resumed.error)]  # no verdict: the cell says so
            else:
                found = resumed.findings
            if first:
                for check, detail in (f for f in found if f[0] != "STUCK"):
                    col.problems.setdefault(check, ResumeFailure(
                        check, run.windows[state.point].words(), state.model, _describe_file(raw), resumed.did,
                        detail))
            row, phase_words, step = api.row_key(run.windows[state.point], run.ops, state.point)
            col.labels[row] = (phase_words, step)
            cell = col.cells.setdefault(row, [])
            for word in [cells.get(c) or c.lower() for c, _ in found] or [api.OK]:
                if word not in cell:
                    cell.append(word)
            col.states += 1
        for cell in col.cells.values():
            if len(cell) > 1 and api.OK in cell:
                cell.remove(api.OK)
        return col

    def drive(self, level: api.Level) -> Optional[api.Drive]:
        """`crashcourse run` resumes the checkpoint a stopped run left, with this level's function."""
        return api.Drive(level.function, resumes=True)

    def engine_words(self, level: api.Level) -> str:
        return ("Each row: a correct loop is killed at that point, then this resume_agent runs on what it left "
                "(a fresh scripted model; tools that remember what ran before the crash).")


# How level 4's column reads: each row a crash state resumed, the checks that went wrong named.
RESUME_COLUMN = api.NamedChecks(fine="{title}: resumed well from all {states} crash states",
                                failing="{title}: resume goes wrong ({names})")

LEVEL = ResumeLevel()
