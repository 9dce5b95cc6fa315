"""The kit's reference resume driver: crash a run, then pick it up again from its checkpoint.

Level 1 asks which fields a checkpoint needs. The honest answer is to try: run the protocol's
loop with the student's ``save_checkpoint``, kill it at a chosen moment, then resume from whatever
is on disk, using the student's ``load_checkpoint``, and watch what the resumed run gets wrong.

:func:`crash_run` plays the loop of DESIGN.md §3 on a scripted scenario. Its in-memory state also
carries two runtime-only keys a real harness has (``client``, a live API client that cannot be
written to a file, and ``startedAt``, a clock reading), which must stay out of the checkpoint. It
stops with :class:`SimulatedCrash` either while a turn's tool runs (after save point A) or while the
model is being called (after save point B).

:func:`resume_run` is what a careful harness does on restart, written once so every submission is
judged by the same resume:

1. ``load_checkpoint(directory)``; an exception there means the resume was refused;
2. report which task it is resuming (the file's ``task``);
3. count on from the file's ``turns`` and ``tokensUsed`` (a missing one counts from 0, which is
   what a resume without it has to do);
4. answer a ``pendingToolUse`` with an error ``tool_result`` (at-most-once: the call was
   interrupted and its outcome is unknown), so the conversation is one the API accepts;
5. loop: call the model, add its spend; a spend budget trips once, at the first response that
   takes ``tokensUsed`` to the budget; the model may ask for another tool only while ``turns`` is
   under the cap. (The budget reads ``tokensUsed`` because that is spend summed over every call.
   A compaction rule would read the last call's input size instead: see the lesson's deeper page.)

The ``check_*`` functions at the end are level 1's checks. Each returns ``None`` when the
submission behaves, or a message for the learner: what was on disk, what resume ran into, what to
try. ``exercises/level1/test_checkpoint.py`` turns each into one test; the kit's own tests call
:func:`level1_verdict` to grade a corpus of submissions in-process.
"""

from __future__ import annotations

import base64
import builtins
import copy
import json
import os
import pickle
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from grader.levels import api
from grader.levels.api import (CHECKPOINT_NAME, crossed_file_systems, field_problems, FIELDS, FreshProcessDied, from_turns, Hang, hang_mark,
                               hangs_since, initial_state, KnownHang, LevelModule, loop_timeout, LoopTimeout,
                               learner_namespace, pending_record, read_or_none, run_fresh, served_here,
                               reference_saves, Scenario, ScriptedModelError, ScriptedToolError, snapshot, spend,
                               support_tickets, time_limit, tool_result_message, tool_use_blocks, working_in)

RUNTIME_KEYS = ("client", "startedAt")
# Not the default "checkpoints", and nested with a space in it: a save that ignores `directory`, or
# builds the path by hand, shows up. load_checkpoint is handed an absolute folder (ABSOLUTE_LOAD).
RUN_DIRECTORY = os.path.join("crashed run", "saved state")
ABSOLUTE_LOAD = os.path.join("elsewhere", "loaded state")


# Why a level-1 check failed, where one story has a cause of its own (hints.md names it in task 3).
api.declare_causes("fields", {
    "version-not-int": "`version` true or 1.0 loads as version 1: Python's == says they equal 1, the protocol "
                       "does not",
})


class Story(str):
    """A check's story (what it returns), carrying why as data: a key of the "fields" causes, or ""."""

    cause = ""

    @classmethod
    def because(cls, text: str, cause: str) -> "Story":
        told = cls(text)
        told.cause = cause
        return told


class SimulatedCrash(BaseException):
    """The process dies here. A BaseException, so an ``except Exception`` cannot swallow it."""


class LiveClient:
    """Stands in for an API client object: it lives in memory and has no place in a JSON file."""

    def __repr__(self) -> str:
        return "<LiveClient connected to api.anthropic.com>"


# --------------------------------------------------------------------------------------------- runs


@dataclass
class Save:
    """One call of the student's ``save_checkpoint`` and what it left in the directory."""

    label: str           # "A", "B" or "final"
    turn: int            # the turn it belongs to (1-based; the final save carries the last turn)
    expected: dict       # the six fields of the state at that moment, as JSON gives them back
    raw: Optional[bytes]  # checkpoint.json after the save returned (None: there is none)
    changed_state: str = ""  # how save_checkpoint changed the in-memory state, if it did

    def words(self) -> str:
        if self.label == "final":
            return "the final save"
        return f"save point {self.label} of turn {self.turn}"


@dataclass
class CrashedRun:
    scenario: Scenario
    workdir: str
    directory: str
    crash_turn: int
    crash_phase: str      # "tool": while that turn's tool ran; "model": while the model was called after it
    saves: list = field(default_factory=list)
    tools: Any = None     # the ScriptedTools, shared with the resume so every run of a tool is counted
    responses: int = 0    # model responses received before the crash
    error: Optional[str] = None   # save_checkpoint raised, or the run did not reach the crash
    tool_runs_before: int = 0     # tools that ran before the crash (the one in flight included)
    tip: str = ""                 # what to try, when the error has a known cause
    stuck: Optional[Hang] = None  # save_checkpoint got stuck (or was not run again, having got stuck before)

    def words(self) -> str:
        if self.crash_phase == "tool":
            name = self.pending_name()
            return f"the process was killed in turn {self.crash_turn}, while `{name}` was running"
        return f"the process was killed after turn {self.crash_turn}, while the model was being called"

    def saves_words(self) -> str:
        """The run, for a check that reads each save as it is written (the kill at its end plays no part)."""
        return f"each save of its first {self.crash_turn} turns, read as soon as it was written"

    def pending_name(self) -> str:
        blocks = tool_use_blocks(self.scenario.responses[self.crash_turn - 1]["content"])
        return blocks[0]["name"] if blocks else "?"

    def pending_id(self) -> str:
        return tool_use_blocks(self.scenario.responses[self.crash_turn - 1]["content"])[0]["id"]

    @property
    def path(self) -> str:
        return os.path.join(self.workdir, self.directory, CHECKPOINT_NAME)

    def raw(self) -> Optional[bytes]:
        try:
            with open(self.path, "rb") as f:
                return f.read()
        except OSError:
            return None


def crash_run(save_checkpoint: Callable, scenario: Scenario, workdir: str, crash_turn: int, crash_phase: str,
              directory: str = RUN_DIRECTORY) -> CrashedRun:
    """Run the protocol's loop with ``save_checkpoint`` at save points A, B and final; crash as asked.

    Runs inside ``workdir`` (the student's code sees it as the current directory).
    """
    run = CrashedRun(scenario, workdir, directory, crash_turn, crash_phase)
    model, tools = scenario.model(), scenario.executor()
    run.tools = tools
    path = os.path.join(workdir, directory, CHECKPOINT_NAME)
    state = initial_state(scenario.task)
    state["client"] = LiveClient()
    state["startedAt"] = time.monotonic()

    def save(label: str) -> None:
        expected = snapshot(state)
        before = {key: state.get(key) for key in RUNTIME_KEYS}
        before_fields = json.dumps(expected, sort_keys=True)
        turn = state["turns"] + (1 if label == "A" else 0)
        try:
            save_checkpoint(state, directory)
        except (SimulatedCrash, LoopTimeout):
            raise  # the kit stopping the run, not something the learner's save raised
        except Exception as exc:  # noqa: BLE001 - the student's save may raise anything; it becomes the lesson
            where = "the final save" if label == "final" else f"save point {label} of turn {turn}"
            run.error = f"save_checkpoint raised {type(exc).__name__} at {where}: {exc}"
            run.tip = _why_save_raised(exc)
            raise SimulatedCrash("save raised") from None
        changed = ""
        missing = [key for key in RUNTIME_KEYS if state.get(key) is not before[key]]
        if missing:
            changed = ("save_checkpoint removed or replaced " + " and ".join(f"`{k}`" for k in missing)
                       + " in the loop's own state; the loop still needs "
                       + ("them" if len(missing) > 1 else "it") + " after the save")
        else:
            try:
                now = json.dumps(snapshot(state), sort_keys=True)
            except (KeyError, TypeError, ValueError):
                now = None
            if now != before_fields:
                changed = "save_checkpoint changed the loop's own state while saving it"
        run.saves.append(Save(label, turn, expected, read_or_none(path), changed))

    with working_in(workdir), time_limit(loop_timeout(), owner=save_checkpoint):
        try:
            response = model(tools=copy.deepcopy(scenario.tools), messages=copy.deepcopy(state["messages"]))
            run.responses += 1
            state["tokensUsed"] += spend(response)
            while response.get("stop_reason") == "tool_use":
                state["messages"].append({"role": "assistant", "content": response["content"]})
                block = tool_use_blocks(response["content"])[0]
                state["pendingToolUse"] = pending_record(block)
                save("A")
                turn = state["turns"] + 1
                result = tools(block["name"], block["input"])
                if (turn, "tool") == (crash_turn, crash_phase):
                    raise SimulatedCrash(f"killed while {block['name']} ran")
                state["messages"].append(tool_result_message(block, result))
                state["turns"] += 1
                state["pendingToolUse"] = None
                save("B")
                if (turn, "model") == (crash_turn, crash_phase):
                    raise SimulatedCrash("killed while the model was called")
                response = model(tools=copy.deepcopy(scenario.tools), messages=copy.deepcopy(state["messages"]))
                run.responses += 1
                state["tokensUsed"] += spend(response)
            state["messages"].append({"role": "assistant", "content": response["content"]})
            save("final")
            run.error = run.error or f"the run finished before turn {crash_turn}, so it never crashed"
        except SimulatedCrash:
            pass
        except LoopTimeout as exc:
            run.error, run.stuck = str(exc), exc.hang
    run.tool_runs_before = tools.calls
    return run


def _why_save_raised(exc: Exception) -> str:
    if crossed_file_systems(exc):
        return ("make the temp file in the checkpoint's own folder (pass dir=directory to tempfile, or build its path "
                "with os.path.join(directory, ...)): the system temp folder, /tmp on Linux, is a file system of its own "
                "on most machines and in the grader's box, and a rename cannot move a file from one file system to "
                "another, so the operating system refuses it with EXDEV (\"Invalid cross-device link\"); the kit "
                "refuses it the same way where this machine keeps both on one file system")
    if isinstance(exc, TypeError) and "not JSON serializable" in str(exc):
        return ("the loop's state also holds runtime-only things (`client`, a live API client, and `startedAt`, a "
                "clock reading) that cannot and should not go into the file: pick out the six protocol fields "
                "instead of dumping the whole state")
    return ""


# --------------------------------------------------------------------------------------------- resume


@dataclass
class Resume:
    """What the reference resume did with the directory a crashed run left behind."""

    refused: Optional[BaseException] = None    # what load_checkpoint raised
    loaded: Any = None                         # what load_checkpoint returned
    task: Optional[str] = None                 # the task resume could report ("" if the file had none)
    start_turns: Optional[int] = None          # the turn count it read (None: there was none)
    start_tokens: Optional[int] = None
    assumed: list = field(default_factory=list)  # what resume had to assume because a field was missing
    turns: int = 0                             # resume's own turn counter at the end
    tokens: int = 0                            # resume's own tokensUsed at the end
    tool_runs: list = field(default_factory=list)   # (name, id) of each tool run after the restart
    reconciled: Optional[dict] = None          # the pending call resume answered
    compacted_at: Optional[int] = None         # the response that tripped the spend budget (1-based, whole task)
    stopped_by_cap: bool = False
    finished: bool = False
    error: Optional[str] = None                # what stopped the resume short
    report_line: str = ""                      # what resume tells the user when it starts
    stuck: Optional[Hang] = None               # load_checkpoint got stuck (or was not run again)


def _load_job(load_checkpoint: Callable, workdir: str, directory: str) -> tuple:
    """``load_checkpoint(directory)`` in ``workdir``, as plain data (it runs in a fresh process)."""
    with working_in(workdir), time_limit(loop_timeout(), owner=load_checkpoint):
        try:
            state = load_checkpoint(directory)
        except LoopTimeout as exc:
            return ("stuck", type(exc).__name__, str(exc), exc.where, exc.hang)
        except Exception as exc:  # noqa: BLE001 - refusing is the loader's job; what it raised is reported
            if not served_here():  # run here (the sandbox's stand-in, or no fork): the exception itself
                return ("kept", exc)
            return ("raised", type(exc).__name__, [c.__name__ for c in type(exc).__mro__], str(exc))
    if not served_here():
        return ("returned", state)
    try:
        pickle.dumps(state)
    except Exception:  # noqa: BLE001 - an object of the learner's own class: only its name can travel
        return ("opaque", type(state).__name__)
    return ("returned", state)


def _load_after_crash(load_checkpoint: Callable, workdir: str, directory: str,
                      ) -> tuple[Any, Optional[BaseException], Optional[LoopTimeout]]:
    """``(state, raised, stopped)``: what ``load_checkpoint`` made of the folder a crashed run left.

    After a real crash only the files are left, so the loader runs in a process that never saw the
    run (:func:`grader.engine.fresh.run_fresh`): a state kept in memory by the save is gone. What it
    raised is rebuilt here as the learner's own exception class of that name, where there is one.
    """
    try:
        answer = run_fresh(_load_job, load_checkpoint, workdir, directory)
    except FreshProcessDied as exc:
        return None, RuntimeError(f"load_checkpoint ended the process it ran in ({exc})"), None
    if answer[0] == "stuck":
        kind, message, where, hang = answer[1:]
        return None, None, (KnownHang if kind == "KnownHang" else LoopTimeout)(message, where, hang)
    if answer[0] == "kept":
        return None, answer[1], None
    if answer[0] == "raised":
        return None, _rebuilt(load_checkpoint, *answer[1:]), None
    if answer[0] == "opaque":
        name = answer[1] if str(answer[1]).isidentifier() else "object"
        return type(name, (), {"__module__": "checkpoint"})(), None, None
    return answer[1], None, None


def _rebuilt(load_checkpoint: Callable, name: str, mro: list, message: str) -> BaseException:
    """An exception named ``name`` raised in another process, as the learner's class of that name if
    their module has one, else a builtin one (or a new class on the nearest builtin base)."""
    cls = (learner_namespace(load_checkpoint) or {}).get(name)
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        base = next((getattr(builtins, n) for n in mro if isinstance(getattr(builtins, n, None), type)
                     and issubclass(getattr(builtins, n), Exception)), Exception)
        cls = base if base.__name__ == name else type(name, (base,), {"__module__": "checkpoint"})
    try:
        return cls(message)
    except Exception:  # noqa: BLE001 - a class whose constructor wants other arguments
        exc = cls.__new__(cls)
        exc.args = (message,)
        return exc


def resume_run(load_checkpoint: Callable, run: CrashedRun, *, max_turns: int = 50,
               compact_at: Optional[int] = None) -> Resume:
    """Resume ``run`` from its checkpoint with the student's ``load_checkpoint`` (see the module docstring)."""
    out = Resume()
    scenario = run.scenario
    model, tools = scenario.model(), run.tools
    state, refused, stopped = _load_after_crash(load_checkpoint, run.workdir, run.directory)
    if stopped is not None:
        out.error, out.stuck = str(stopped), stopped.hang
        return out
    if refused is not None:
        out.refused = refused
        return out
    out.loaded = state
    if not isinstance(state, dict):
        out.error = f"load_checkpoint returned {type(state).__name__}, not the checkpoint's dict"
        return out

    task = state.get("task")
    out.task = task if isinstance(task, str) else ""
    if not out.task:
        out.assumed.append("the file names no task")
    turns = state.get("turns")
    out.start_turns = turns if isinstance(turns, int) else None
    if out.start_turns is None:
        out.assumed.append("no `turns`: counted turns from 0")
    tokens = state.get("tokensUsed")
    out.start_tokens = tokens if isinstance(tokens, int) else None
    if out.start_tokens is None:
        out.assumed.append("no `tokensUsed`: counted spend from 0")
    turns, tokens = out.start_turns or 0, out.start_tokens or 0
    out.report_line = (f"Resuming {out.task!r} at turn {turns}" if out.task else
                       f"Resuming an unknown task at turn {turns}")

    messages = state.get("messages")
    if messages is None:
        if not out.task:
            out.error = "the file has neither `messages` nor `task`: there is nothing to resume"
            return out
        # All a resume can do without the conversation: start the task again from its first message.
        out.assumed.append("no `messages`: started the conversation again from the task")
        messages = [{"role": "user", "content": out.task}]
    if not isinstance(messages, list):
        out.error = (f"`messages` is a JSON {type(messages).__name__}, not a list, so resume had no conversation "
                     "it could send to the model")
        return out
    messages = copy.deepcopy(messages)

    pending = state.get("pendingToolUse")
    if isinstance(pending, dict) and pending.get("id"):
        # At-most-once: the call was interrupted and its outcome is unknown; say so to the model.
        messages.append({"role": "user", "content": [{
            "type": "tool_result", "tool_use_id": pending["id"], "is_error": True,
            "content": f"interrupted by a crash while {pending.get('name')} ran; its outcome is unknown"}]})
        out.reconciled = pending
        turns += 1

    # The resume itself is the kit's loop; the limit only guards against a state it cannot finish.
    with working_in(run.workdir), time_limit(loop_timeout()):
        try:
            while True:
                response = model(tools=copy.deepcopy(scenario.tools), messages=copy.deepcopy(messages))
                index = sum(1 for m in messages if m.get("role") == "assistant") + 1
                tokens += spend(response)
                if compact_at is not None and out.compacted_at is None and tokens >= compact_at:
                    out.compacted_at = index
                messages.append({"role": "assistant", "content": response["content"]})
                if response.get("stop_reason") != "tool_use":
                    out.finished = True
                    break
                if turns >= max_turns:
                    out.stopped_by_cap = True
                    break
                block = tool_use_blocks(response["content"])[0]
                result = tools(block["name"], block["input"])
                out.tool_runs.append((block["name"], block["id"]))
                messages.append(tool_result_message(block, result))
                turns += 1
        except ScriptedModelError as exc:
            out.error = f"the model call was refused: {exc}"
        except ScriptedToolError as exc:
            out.error = f"a tool call went wrong: {exc}"
        except LoopTimeout as exc:
            out.error = str(exc)
    out.turns, out.tokens = turns, tokens
    return out


# --------------------------------------------------------------------------------------------- scenarios


def long_task(seed: int = 0, turns: int = 8) -> Scenario:
    """A task that needs more turns than the cap the level-1 checks set: one weekly report per turn."""
    calls = [("read_report", {"week": week}, json.dumps({"week": week, "refunds": (seed * 7 + week * 13) % 40}))
             for week in range(1, turns + 1)]
    return from_turns("Add up the refunds in the last eight weekly reports", calls,
                      "The eight reports list the refunds; the total is in my last message.", seed=seed,
                      name="weekly-refunds")


def future_format(run: CrashedRun) -> bytes:
    """A checkpoint as a later version of the protocol might write it: version 2, messages compressed."""
    state = run.saves[-1].expected if run.saves else snapshot(initial_state(run.scenario.task))
    packed = base64.b64encode(zlib.compress(json.dumps(state["messages"]).encode())).decode()
    record = dict(state, version=2, messages={"encoding": "zlib+base64", "data": packed})
    return json.dumps(record).encode()


# --------------------------------------------------------------------------------------------- messages


def describe_file(raw: Optional[bytes]) -> str:
    """The checkpoint in a line: its size, and the keys it holds (and which protocol keys it lacks)."""
    if raw is None:
        return "no checkpoint.json at all"
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return f"checkpoint.json, {len(raw):,} bytes that are not JSON (it starts {raw[:40]!r})"
    if not isinstance(data, dict):
        return f"checkpoint.json, {len(raw):,} bytes holding a JSON {type(data).__name__}"
    keys = ", ".join(f"`{k}`" for k in data) or "none"
    missing = [k for k in FIELDS if k not in data]
    text = f"checkpoint.json, {len(raw):,} bytes, keys {keys}"
    if "version" in data and data["version"] != 1:
        text += f" (`version` is {json.dumps(data['version'])})"
    if missing:
        text += "; no " + ", ".join(f"`{k}`" for k in missing)
    return text


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _story(headline: str, run: Optional[CrashedRun], raw: Optional[bytes], ran_into: str, to_try: str,
           extra: str = "", label: str = "What resume ran into", each_save: bool = False) -> str:
    """``each_save``: the check read every save as it was written, so the run is told that way, not by
    the kill that ended it."""
    lines = [headline]
    if run is not None:
        lines.append(f"  The run: {run.scenario.task!r}; {run.saves_words() if each_save else run.words()}.")
    lines.append(f"  On disk: {describe_file(raw)}.")
    if extra:
        lines.append(f"  {extra}")
    lines.append(f"  {label}: {ran_into}.")
    lines.append(f"  What to try: {to_try}.")
    return "\n".join(lines)


def _run_trouble(run: CrashedRun) -> Optional[str]:
    """The crashed run itself went wrong (save raised or got stuck, wrote elsewhere): every check reports
    that first."""
    if run.stuck is not None:
        return run.error  # where save_checkpoint got stuck, and what to try (grader.engine.hangs)
    if run.error:
        return _story("The loop could not get as far as the crash: your save_checkpoint failed while it ran.",
                      None, run.raw(), run.error, run.tip or "make save_checkpoint(state, directory) write "
                      "<directory>/checkpoint.json for any state the loop passes, and return",
                      label="What happened")
    if run.raw() is None:
        return _story(f"save_checkpoint returned, but there is no {CHECKPOINT_NAME} in the folder it was given.",
                      run, None, f"resume looked in {run.directory!r}/ and found nothing to resume from",
                      "write the file to os.path.join(directory, 'checkpoint.json'), using the `directory` "
                      "argument rather than a fixed folder")
    return None


def _refused(resume: Resume, run: CrashedRun) -> Optional[str]:
    if resume.stuck is not None:
        return resume.error  # load_checkpoint did not return: where it was stuck, and what to try
    if resume.refused is None:
        return None
    exc = resume.refused
    return _story("Resume could not start: load_checkpoint refused the file save_checkpoint had just written.",
                  run, run.raw(), f"load_checkpoint raised {type(exc).__name__}: {exc}{_falsy_fields(run.raw())}",
                  "make the two agree: save_checkpoint writes the six protocol fields, and load_checkpoint "
                  "accepts any file that has them with version 1")


def _falsy_fields(raw: Optional[bytes]) -> str:
    """For a file that holds all six fields, the ones whose values are falsy, in words ("" if none): a
    loader that tests a field's value (``if not data.get(key)``) takes them for missing. Said as an if:
    the loader may have refused the file for another reason."""
    try:
        data = json.loads(raw or b"")
    except (ValueError, RecursionError):
        return ""
    if not isinstance(data, dict) or any(key not in data for key in FIELDS):
        return ""
    falsy = [f"`{key}` is {json.dumps(data[key])}" for key in FIELDS if not data[key]]
    if not falsy:
        return ""
    return (f". The file holds all six fields; {' and '.join(falsy)}. If load_checkpoint tests a field's value "
            "(`if not data.get(key)`) rather than whether the key is there, it takes 0, null or an empty list "
            "for a missing field")


def _resume_error(resume: Resume, run: CrashedRun) -> Optional[str]:
    if resume.error is None:
        return None
    if resume.error.startswith("the model call was refused"):
        # The loader gave back what the file held; what the file held is a conversation the API refuses.
        return _story("Resume fell over: the conversation in the file is one the model cannot be sent.", run,
                      run.raw(), resume.error,
                      "save `messages` whole, exactly as the loop holds it: resume sends that list to the model as "
                      "it is, and the API refuses one that does not begin with the user's task, or whose tool "
                      "results have lost the calls they answer")
    return _story("Resume fell over.", run, run.raw(), resume.error,
                  "check that load_checkpoint returns the dict it read, with the six protocol fields")


# --------------------------------------------------------------------------------------------- level 1 checks

CAP = 4            # turn cap of the turns check (the long task needs 8)
CAP_CRASH = 3      # turns done before the crash


def _crash_then_resume(module: Any, scenario: Scenario, workdir: str, crash_turn: int, crash_phase: str, *,
                       no_error: bool = False, **resume_options: Any) -> tuple:
    """Crash a run of the learner's save_checkpoint, then resume it with their load_checkpoint.

    Returns ``(run, resume, problem)``: ``problem`` is the story of the first thing that went wrong
    before the field under test could matter (the save failed, the loader refused a good file, or,
    with ``no_error``, the resumed run fell over), else None.
    """
    run = crash_run(module.save_checkpoint, scenario, workdir, crash_turn, crash_phase)
    trouble = _run_trouble(run)
    if trouble:
        return run, None, trouble
    resume = resume_run(module.load_checkpoint, run, **resume_options)
    problem = _refused(resume, run) or (_resume_error(resume, run) if no_error else None)
    return run, resume, problem


def check_six_fields(module: Any, seed: int = 0) -> Optional[str]:
    """After every save, checkpoint.json holds exactly the six protocol keys, with the state's values."""
    with tempfile.TemporaryDirectory(prefix="crashcourse-l1-") as workdir:
        run = crash_run(module.save_checkpoint, support_tickets(seed), workdir, 3, "model")
        if run.error:
            return _run_trouble(run)
        for save in run.saves:
            if save.raw is None:
                return _run_trouble(run)
            try:
                data = json.loads(save.raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError) as exc:
                return _story(f"After {save.words()}, checkpoint.json is not JSON.", run, save.raw,
                              f"json.loads raised {type(exc).__name__}: {exc}",
                              "write the record with json.dump (or json.dumps) so any program can read it back",
                              each_save=True)
            problems = field_problems(data)
            if problems:
                runtime = [k for k in RUNTIME_KEYS if isinstance(data, dict) and k in data]
                why = (". The loop's state also carries runtime-only keys (`client`, `startedAt`): they describe "
                       "this process, not the task, so they stay out of the file" if runtime else "")
                return _story(f"After {save.words()}, checkpoint.json does not hold exactly the six protocol fields.",
                              run, save.raw, "; ".join(problems), each_save=True, label="What is wrong", to_try=
                              "write a dict built from exactly version, task, turns, tokensUsed, messages "
                              "and pendingToolUse, taken from the state you are given (the tests below show what "
                              "resume runs into without each one)" + why)
            if data != save.expected:
                wrong = [k for k in FIELDS if data.get(k) != save.expected[k]]
                shown = ", ".join(_difference(k, data.get(k), save.expected[k]) for k in wrong)
                return _story(f"After {save.words()}, checkpoint.json has the six keys, but not the loop's values.",
                              run, save.raw, shown, each_save=True, label="What is wrong", to_try=
                              "copy each value from the state as it is at the moment of the save, without "
                              "changing or defaulting it")
            if save.changed_state:
                return _story(f"At {save.words()}, saving changed the running loop.", run, save.raw,
                              save.changed_state, each_save=True, label="What is wrong", to_try=
                              "build a new dict for the file and leave the state you were given as it was")
    return None


def _difference(key: str, got: Any, want: Any) -> str:
    """How the file's value of ``key`` differs from the loop's, in words that show the difference: two
    long lists are told by where they part (their opening 60 characters are often the same)."""
    if isinstance(got, list) and isinstance(want, list):
        part = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        if len(got) != len(want) and part == min(len(got), len(want)):
            longer, which = (want, "missing from the file") if len(want) > len(got) else (got, "not in the loop's")
            return (f"`{key}` holds {_n(len(got), 'item')} but the loop had {len(want)}; {which}: "
                    f"{json.dumps(longer[part])[:80]}{'' if abs(len(want) - len(got)) == 1 else ' and more'}")
        return (f"`{key}` differs from the loop's at item {part}: the file has {json.dumps(got[part])[:60]} where "
                f"the loop had {json.dumps(want[part])[:60]}")
    return f"`{key}` is {json.dumps(got)[:60]} but the loop had {json.dumps(want)[:60]}"


def check_turns(module: Any, seed: int = 0) -> Optional[str]:
    """Without `turns`, the turn cap overshoots: resume counts from 0 and grants a crashed task a new allowance."""
    with tempfile.TemporaryDirectory(prefix="crashcourse-l1-") as workdir:
        run, resume, problem = _crash_then_resume(module, long_task(seed), workdir, CAP_CRASH, "model", no_error=True,
                                                  max_turns=CAP)
        if problem:
            return problem
        total = run.tool_runs_before + len(resume.tool_runs)
        if total == CAP and resume.stopped_by_cap:
            return None
        counted = ("it read no `turns`, so it counted from 0" if resume.start_turns is None
                   else f"it read turns={resume.start_turns}")
        verdict = (f"the task was capped at {CAP} turns, and {total} ran" if total > CAP else
                   f"the cap fired early: the task was allowed {CAP} turns, and only {total} ran")
        return _story(f"The turn cap did not hold across the crash: {verdict}.", run, run.raw(),
                      f"{counted} and let {_n(len(resume.tool_runs), 'more tool')} run, after "
                      f"{run.tool_runs_before} had run before the crash",
                      "save the loop's `turns` with the checkpoint, so resume counts on from where the crashed "
                      "run stopped" if resume.start_turns is None else
                      "save `turns` exactly as the loop has it: the turns completed so far, which is the number of "
                      "tool results in `messages`")


def check_tokens(module: Any, seed: int = 0) -> Optional[str]:
    """Without `tokensUsed`, a spend budget trips off a count that restarted at zero: late, or never."""
    scenario = long_task(seed)
    spent = [spend(r) for r in scenario.responses]
    crash_turn = 3                       # responses 1..3 were received before the crash
    expected_at = crash_turn + 2         # the budget is reached at the second response after resume
    threshold = sum(spent[:expected_at])
    with tempfile.TemporaryDirectory(prefix="crashcourse-l1-") as workdir:
        run, resume, problem = _crash_then_resume(module, scenario, workdir, crash_turn, "model", no_error=True,
                                                  compact_at=threshold)
        if problem:
            return problem
        if resume.compacted_at == expected_at:
            return None
        counted = ("it read no `tokensUsed`, so it counted spend from 0" if resume.start_tokens is None
                   else f"it read tokensUsed={resume.start_tokens}, but the crashed run had spent "
                        f"{sum(spent[:crash_turn]):,}")
        when = (f"tripped at response {resume.compacted_at} instead" if resume.compacted_at
                else "never tripped before the task ended")
        return _story(f"The spend budget tripped at the wrong moment: with a budget of {threshold:,} tokens it is due at "
                      f"model response {expected_at}, and it {when}.", run, run.raw(),
                      f"{counted}; at response {expected_at} its count was "
                      f"{(resume.start_tokens or 0) + sum(spent[crash_turn:expected_at]):,}, short of the budget",
                      "save the running `tokensUsed` with the checkpoint; the per-response usage figures are not "
                      "in `messages`, so resume cannot rebuild the total afterwards")


def check_version(module: Any, seed: int = 0) -> Optional[str]:
    """The file says which format it is, and a format resume does not know is refused, not read."""
    with tempfile.TemporaryDirectory(prefix="crashcourse-l1-") as workdir:
        run = crash_run(module.save_checkpoint, support_tickets(seed), workdir, 2, "model")
        trouble = _run_trouble(run)
        if trouble:
            return trouble
        own = resume_run(module.load_checkpoint, run)
        if own.refused is not None or own.stuck is not None:
            return _refused(own, run)
        with open(run.path, "wb") as f:
            f.write(future_format(run))
        future = resume_run(module.load_checkpoint, run)
        if future.stuck is not None:
            return _refused(future, run)
        unsupported = getattr(module, "UnsupportedVersion", None)
        if isinstance(unsupported, type) and isinstance(future.refused, unsupported):
            return None
        if future.refused is not None:
            return _story("A version-2 checkpoint was refused, but not as an unsupported version.", None,
                          future_format(run), f"load_checkpoint raised {type(future.refused).__name__}: "
                          f"{future.refused}", "check `version` before anything else, and raise "
                          "UnsupportedVersion for any value but 1: a newer format may not have the fields you expect")
        went_on = future.error or ("it carried on as if the file were version 1" if future.loaded is not None else "")
        return _story("A checkpoint written in a future format (version 2) loaded without complaint.", None,
                      future_format(run), f"load_checkpoint returned it, and then {went_on}",
                      ("" if own.loaded and isinstance(own.loaded, dict) and own.loaded.get("version") == 1 else
                       "make save_checkpoint write `version: 1`, and ") +
                      "make load_checkpoint raise UnsupportedVersion when the version is anything but 1, before it "
                      "reads any other field",
                      extra="(version 2 is the kit's example of a later protocol: it stores `messages` compressed.)")


def check_task(module: Any, seed: int = 0) -> Optional[str]:
    """Resume can say which task it is continuing."""
    with tempfile.TemporaryDirectory(prefix="crashcourse-l1-") as workdir:
        run, resume, problem = _crash_then_resume(module, support_tickets(seed), workdir, 2, "model", no_error=True)
        if problem:
            return problem
        if resume.task == run.scenario.task:
            return None
        found = f"the file's task is {resume.task!r}" if resume.task else "the file holds no `task`"
        return _story("Resume could not report which task it was continuing.", run, run.raw(),
                      f"{found}, so the first thing it could tell the user was {resume.report_line!r}",
                      "save the user's task, in words, with the checkpoint: after a restart the file is all the "
                      "harness knows")


def check_messages(module: Any, seed: int = 0) -> Optional[str]:
    """Without `messages`, resume starts the task over and repeats tools that already ran."""
    with tempfile.TemporaryDirectory(prefix="crashcourse-l1-") as workdir:
        run, resume, problem = _crash_then_resume(module, support_tickets(seed), workdir, 3, "model")
        if problem:
            return problem
        if resume.finished and not resume.tool_runs and not resume.error:
            return None
        again = ", ".join(name for name, _ in resume.tool_runs)
        ran_into = (f"it had no conversation to continue, started over from the task and ran {again} again, "
                    "publishing the table a second time" if resume.tool_runs else (resume.error or "it did not finish"))
        return _story("Resume did not continue the conversation; it started a new one.", run, run.raw(), ran_into,
                      "save the whole `messages` list: the model remembers nothing between calls")


def check_pending(module: Any, seed: int = 0) -> Optional[str]:
    """A crash while a tool runs is on disk as pendingToolUse, so resume answers that call before going on."""
    with tempfile.TemporaryDirectory(prefix="crashcourse-l1-") as workdir:
        run, resume, problem = _crash_then_resume(module, support_tickets(seed), workdir, 3, "tool")
        if problem:
            return problem
        wanted = run.pending_id()
        if resume.reconciled and resume.reconciled.get("id") == wanted and resume.finished and not resume.error:
            return None
        name = run.pending_name()
        if resume.reconciled and resume.reconciled.get("id") == wanted:
            # The field did its work: the call was found and answered. What went wrong came after.
            return _story(f"Resume found the crash in the middle of `{name}` and answered that call, but it could "
                          "not go on from there.", run, run.raw(), resume.error or "it did not finish",
                          "save `messages` exactly as the loop holds it: at save point A the list ends with the "
                          "assistant message that asked for the pending call, and the answer resume adds goes "
                          "right after it")
        if resume.reconciled:
            ran_into = (f"pendingToolUse named {resume.reconciled.get('id')}, but the call in flight was {wanted}; "
                        f"{resume.error or 'the answer went to the wrong call'}")
        else:
            ran_into = (f"nothing in the file marked `{name}` as started and unfinished, so resume did not notice "
                        f"the crash mid-tool and called the model straight away; "
                        f"{resume.error or 'the call was never reconciled'}")
        return _story(f"A crash in the middle of `{name}` went unnoticed on resume.", run, run.raw(), ran_into,
                      "save `pendingToolUse` (null, or the {id, name, input} of the call that has not finished): "
                      "it is how resume knows a tool call was cut off and must be answered before anything else")


def _good_file(seed: int = 0) -> dict:
    """A checkpoint a correct loop saves at point A of turn 2 (so pendingToolUse is set)."""
    return _good_files(seed)[0][1]


def _exceptions(module: Any) -> tuple[Optional[type], Optional[type], Optional[str]]:
    base, unsupported = getattr(module, "CheckpointError", None), getattr(module, "UnsupportedVersion", None)
    if not (isinstance(base, type) and issubclass(base, Exception)):
        return None, None, ("checkpoint.py needs `class CheckpointError(Exception)`: the error load_checkpoint "
                            "raises for a file it cannot resume from")
    if not (isinstance(unsupported, type) and issubclass(unsupported, base)):
        return None, None, ("checkpoint.py needs `class UnsupportedVersion(CheckpointError)`, so a caller that "
                            "catches CheckpointError also catches a version it does not know")
    return base, unsupported, None


def _load_bytes(module: Any, raw: bytes) -> tuple[Any, Optional[BaseException]]:
    """What ``load_checkpoint`` makes of a file holding ``raw``: ``(returned, raised)``.

    It runs in a process that never ran a save (as a resume after a crash does), so the answer is
    the same whichever tests ran before it: a loader that fills in what a save kept in memory gets
    nothing of it there."""
    with tempfile.TemporaryDirectory(prefix="crashcourse-l1-") as workdir:
        workdir = os.path.realpath(workdir)
        folder = os.path.join(workdir, ABSOLUTE_LOAD)
        os.makedirs(folder)
        with open(os.path.join(folder, CHECKPOINT_NAME), "wb") as f:
            f.write(raw)
        returned, raised, stopped = _load_after_crash(module.load_checkpoint, workdir, folder)
        return (None, stopped) if stopped is not None else (returned, raised)


def _stuck_on(exc: LoopTimeout, what: str) -> str:
    """The story of a loader that got stuck, saying which file it had been given."""
    first, _, rest = str(exc).partition("\n")
    if exc.hang is None or not rest:
        return str(exc)  # not run again: the first story said it all
    return f"{first}\n  It had been given {what}.\n{rest}"


def _invented(raw: bytes, returned: Any) -> str:
    """The fields ``returned`` holds that the file ``raw`` lacked, in words (`task` = ""), or ""."""
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError):
        return ""
    if not isinstance(parsed, dict) or not isinstance(returned, dict):
        return ""
    extra = [key for key in FIELDS if key in returned and key not in parsed]
    return ", ".join(f"`{key}` = {json.dumps(returned[key], default=repr)[:40]}" for key in extra)


def _load_case(module: Any, raw: bytes, want: type, want_name: str, what: str, resume_would: str,
               to_try: str) -> Optional[str]:
    returned, exc = _load_bytes(module, raw)
    if isinstance(exc, LoopTimeout):
        return _stuck_on(exc, what)
    if isinstance(exc, want):
        return None
    if exc is None:
        headline = f"load_checkpoint accepted {what}; it should raise {want_name}."
        got = f"load_checkpoint returned it ({type(returned).__name__}) without complaint"
        invented = _invented(raw, returned)
        if invented:
            # A default filled in for a missing field: resume never trips, it goes on from a made-up value.
            got = f"load_checkpoint returned it with {invented} filled in, which the file never held"
            resume_would = "resume would carry on from that made-up value as if the checkpoint were whole"
    else:
        headline = f"load_checkpoint refused {what}, but with {type(exc).__name__}, not {want_name}."
        got = f"load_checkpoint raised {type(exc).__name__}: {exc}"
    return _story(headline, None, raw, f"{got}; {resume_would}", to_try)


def check_load_versions(module: Any, seed: int = 0) -> Optional[str]:
    """load_checkpoint raises UnsupportedVersion for version 2, version 0, true, 1.0 and a missing version."""
    _, unsupported, problem = _exceptions(module)
    if problem:
        return problem
    good = _good_file(seed)
    no_version = {k: v for k, v in good.items() if k != "version"}
    cases = [
        (dict(good, version=2), "a file marked version 2",
         "resume would read a newer format as if it were this one"),
        (dict(good, version=0), "a file marked version 0",
         "resume would read an older or unfinished format as if it were this one"),
        (no_version, "a file with no `version`",
         "resume cannot know which format it holds, so it would be guessing"),
        (dict(good, version=True), "a file whose `version` is true",
         "in Python True == 1, but JSON's true is not the number 1: the file was not written by this protocol"),
        (dict(good, version=1.0), "a file whose `version` is 1.0",
         "1.0 == 1 in Python, but the protocol's version is the int 1, and a float there means another writer"),
        ({"version": 2, "task": good["task"], "conversation": {"encoding": "zlib+base64", "data": "eJwDAAAAAAE="},
          "pending": []}, "a version-2 file whose other fields have new names",
         "a newer format need not have the old fields; only `version` says what the file is, so it is read first"),
    ]
    tip = ("read `version` before any other field; if it is missing, or anything but the int 1, raise "
           "UnsupportedVersion (a subclass of CheckpointError, so callers can catch both at once)")
    for data, what, resume_would in cases:
        found = _load_case(module, json.dumps(data).encode(), unsupported, "UnsupportedVersion", what, resume_would,
                           tip)
        if found:
            # true and 1.0 pass a `version == 1` test: that is the mistake, not a missing version check.
            return Story.because(found, "version-not-int") if type(data.get("version")) in (bool, float) else found
    return None


def check_load_shape(module: Any, seed: int = 0) -> Optional[str]:
    """load_checkpoint raises CheckpointError for a missing field, a non-object, and a file that is not JSON."""
    base, _, problem = _exceptions(module)
    if problem:
        return problem
    good = _good_file(seed)
    text = json.dumps(good).encode()
    fields_tip = "after the version check, look for each of the six keys and raise CheckpointError naming any missing"
    object_tip = "check that json gave you a dict before you read any field from it, and raise CheckpointError if not"
    json_tip = ("catch json.JSONDecodeError (a ValueError) around the parse and raise CheckpointError from it, "
                "so the caller hears about a damaged checkpoint, not a parser detail")
    cases = []
    for key in FIELDS[1:]:
        cases.append((json.dumps({k: v for k, v in good.items() if k != key}).encode(), f"a file with no `{key}`",
                      f"resume would trip over the missing `{key}` later, far from the cause", fields_tip))
    cases += [
        (b"[]", "a file holding a JSON list", "resume cannot look up fields in a list", object_tip),
        (b"null", "a file holding JSON null", "resume cannot look up fields in null", object_tip),
        (b'"checkpoint"', "a file holding a JSON string", "resume cannot look up fields in a string", object_tip),
        (text[: len(text) // 2], "half a JSON document (a write cut short)",
         "the caller gets a parser error that says nothing about checkpoints", json_tip),
        (b"", "an empty file", "the caller gets a parser error that says nothing about checkpoints", json_tip),
    ]
    for raw, what, resume_would, tip in cases:
        found = _load_case(module, raw, base, "CheckpointError", what, resume_would, tip)
        if found:
            return found
    return None


def _good_files(seed: int = 0) -> list[tuple[str, dict]]:
    """Good checkpoints a correct loop saves, each with where it was saved: point A of turn 2, then the
    ones whose fields are falsy (the first save, `turns` 0; a save point B, `pendingToolUse` null) and the
    final save. A loader that takes a falsy field for a missing one refuses the last three."""
    scenario = support_tickets(seed)
    saves = reference_saves(scenario.task, scenario.responses, scenario.results)
    a_saves = [s for label, s in saves if label == "A"]
    b_saves = [s for label, s in saves if label == "B"]
    return [("at save point A of turn 2", a_saves[1]),
            ("at save point A of turn 1 (`turns` is 0)", a_saves[0]),
            ("at save point B of turn 1 (`pendingToolUse` is null)", b_saves[0]),
            ("at the end of the run (the final answer saved)", saves[-1][1])]


def check_load_accepts(module: Any, seed: int = 0) -> Optional[str]:
    """load_checkpoint returns each good version-1 file as it is."""
    for where, good in _good_files(seed):
        raw = json.dumps(good).encode()
        returned, exc = _load_bytes(module, raw)
        if isinstance(exc, LoopTimeout):
            return _stuck_on(exc, f"a good checkpoint, saved {where}")
        if exc is not None:
            return _story(f"load_checkpoint refused a good checkpoint, the one a correct loop writes {where}.",
                          None, raw, f"load_checkpoint raised {type(exc).__name__}: {exc}",
                          "accept any file that holds the six fields with version 1, whatever their values: "
                          "0, null and an empty list are values a field has, not a missing field")
        if returned != good:
            return _story(f"load_checkpoint returned something other than the file's contents (a good "
                          f"checkpoint, the one a correct loop writes {where}).", None, raw,
                          f"it returned {json.dumps(returned, default=repr)[:100]}",
                          "return the dict json.load gave you, unchanged")
    return None


_CHECK_FUNCTIONS = {
    "fields": check_six_fields,
    "turns": check_turns,
    "tokensUsed": check_tokens,
    "version": check_version,
    "task": check_task,
    "messages": check_messages,
    "pendingToolUse": check_pending,
    "load-version": check_load_versions,
    "load-shape": check_load_shape,
    "load-accepts": check_load_accepts,
}
# The ids, their order and their words are declared in grader.levels.registry ("fields").
LEVEL1_CHECKS = {c.id: _CHECK_FUNCTIONS[c.id] for c in api.checks("fields")}


def level1_verdict(module: Any, seed: int = 0) -> dict:
    """Every level-1 check on ``module``: ``{check id: message}`` for the ones that fail."""
    return level1_findings(module, seed)[0]


def level1_findings(module: Any, seed: int = 0) -> tuple[dict, dict]:
    """``(problems, stuck)``: :func:`level1_verdict`'s messages, and ``{check id: (kind, Hang)}`` for each
    check that met code that got stuck ("stopped" there, or "refused" having got stuck before), so
    no verdict on it holds. Once a function has got stuck, the checks that call it stop at once."""
    out, stuck = {}, {}
    for name, check in LEVEL1_CHECKS.items():
        mark = hang_mark()
        try:
            problem = check(module, seed)
        except LoopTimeout as exc:
            problem = str(exc)
        except Exception as exc:  # noqa: BLE001 - a submission missing a function fails that check, loudly
            problem = f"{type(exc).__name__}: {exc}"
        met = hangs_since(mark)
        if met:
            stuck[name] = met[0]
            problem = problem or (met[0][1].story if met[0][0] == "stopped" else met[0][1].refusal())
        if problem:
            out[name] = problem
    return out, stuck


# -- the level plug-in ---------------------------------------------------------------------------------

class FieldsLevel(LevelModule):
    """Level 1: each field (and the loader) proved by crashing a run and resuming it."""

    namespace = "fields"

    def column(self, title: str, folder: Path, level: api.Level, seed: int = 0) -> Optional[api.Column]:
        """Each check of :data:`LEVEL1_CHECKS`, ok or what went wrong on resume."""
        module, failed = self.import_file(title, folder, level)
        if failed is not None:
            return failed
        problems, stuck = level1_findings(module, seed)
        col = api.Column(title, problems=problems, namespace=self.namespace, meaning=FIELDS_COLUMN)
        col.stuck = next((hang for kind, hang in stuck.values() if kind == "stopped"), None)
        for check in api.checks(self.namespace):
            key = ("field", 0, check.id)
            col.labels[key] = (check.row, "")
            message = problems.get(check.id)
            if check.id in stuck:
                col.cells[key] = [api.STUCK]
            elif message is None:
                col.cells[key] = [api.OK]
            elif "could not be set up" in message or "no checkpoint.json in the folder" in message:
                col.cells[key] = ["save failed"]
            else:
                col.cells[key] = [check.cell]
        return col

    def render_options(self, level: api.Level) -> dict:
        return {"group": False, "heading": "resume check (crash a run, then resume it)"}

    def engine_words(self, level: api.Level) -> str:
        return ("Each row crashes a run that saves with this checkpoint.py, resumes it with the kit's resume driver, "
                "and says what went wrong.")


# How level 1's column reads: one row per check, each ok or what went wrong on resume.
FIELDS_COLUMN = api.NamedChecks(fine="{title}: all {rows} resume checks fine",
                                failing="{title}: {bad} of {rows} resume checks fail",
                                stuck_after="so the checks that call it could not be made")

LEVEL = FieldsLevel()
