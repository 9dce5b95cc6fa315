"""What must hold in every crash state, each with an id a failure names (DESIGN.md §5).

A :class:`Window` says what the loop had done by a crash point: which saves had finished, which
was in progress, which tool calls had started, whether the model was being called. :func:`check`
reads one checkpoint file against it and returns the first invariant that fails, with what a
resume would run into. The checks run from the most basic (can the file be read at all?) to the
most exact (is it one of the states a correct loop saves?), so a failure names its real cause.
"""

from __future__ import annotations

import json
import operator
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from grader.engine.checkpoint import FIELDS, field_problems, spend, tool_result_ids, tool_use_blocks

INVARIANTS = {
    "PARSE": "checkpoint.json is one complete JSON object (it may be missing only until the first save completes)",
    "FIELDS": "the file has exactly the six protocol keys, with the right types, and version 1",
    "WHOLE": "the file is the last completed save or the save in progress: never a mix, never an older one",
    "TRACE": "every tool call that has started is on disk: its result is in messages, or it is pendingToolUse",
    "PAIRING": "pendingToolUse is the last assistant tool_use; every earlier tool_use has its result right after it",
    "FRESH": "when the model is called, every result so far is on disk and nothing is left pending",
    "COUNTS": "turns equals the tool results in messages; tokensUsed equals the spend of the responses recorded",
    "ATOMIC-DIR": "the temp file lives in the checkpoint's own directory (a rename across file systems is a copy)",
    "DURABLE": "a power cut at any point leaves the last save that returned, or the one in progress, whole: "
               "never an older save, never an empty or torn file",
    "RESUME": "resuming from the file ends in the same transcript as a run that never crashed",
    "RERUN": "a second run, started in the folder a crash left (a torn or stale temp file in it), saves as well "
             "as the first",
    # Level 5 (several tool_use blocks per turn) and level 6 (bytes written per turn).
    "KEPT": "a tool result that came back is on disk before the loop starts another tool or calls the model",
    "ONCE": "each tool call the model named runs once, and its result is recorded once",
    "BYTES": "the bytes written per turn stay bounded as the conversation grows (linear in total, not quadratic)",
}


@dataclass
class Window:
    """What the loop had done at a crash point, in the protocol's terms."""

    phase: str                      # before-first-response, A, tool, B, model, final, done
    turn: int                       # the turn the phase belongs to (1-based; 0 before any)
    allowed: list                   # the snapshots the file may equal here
    absent_ok: bool                 # no file yet is fine (no save has completed)
    started: list = field(default_factory=list)   # tool_use ids whose tool has started
    recorded_results: int = 0       # tool results the loop has received so far
    fresh: bool = False             # the model is being called: everything must be on disk
    tool_name: str = ""
    responses: list = field(default_factory=list)  # model responses received so far
    # spent[k]: what the first k responses of the conversation cost, shared by all its windows
    # (None: summed when needed). A long run's crash states would otherwise add them up each time.
    spent: Optional[list] = None

    def signature(self) -> tuple:
        """Windows with equal signatures accept exactly the same files."""
        return (self.phase, self.turn, len(self.started), self.recorded_results, len(self.responses), self.fresh,
                self.absent_ok, len(self.allowed))

    def words(self) -> str:
        """Where the loop was, in the lesson's words."""
        if self.phase == "before-first-response":
            return "before the first model response"
        if self.phase == "A":
            return f"turn {self.turn}, save point A (the model named `{self.tool_name}`; it has not run yet)"
        if self.phase == "tool":
            return f"turn {self.turn}, while `{self.tool_name}` runs (save point A should be on disk)"
        if self.phase == "B":
            return f"turn {self.turn}, save point B (`{self.tool_name}` returned; its result is being recorded)"
        if self.phase == "model":
            return f"turn {self.turn}, while the model is called with the result of `{self.tool_name}`"
        if self.phase == "final":
            return "the final save (the model answered without asking for a tool)"
        return "after run_agent returned"


# Why a check failed, as data (a Finding's ``cause``): two loops can break the same invariant for
# different reasons, and the nudge and the next hint follow the reason, not the invariant. These are
# the loop invariants' causes; a level declares its own (grader.levels.registry.declare_causes), and
# the faces read every cause's words from the registry.
CAUSES = {
    "no-save-a": "nothing is saved after the model names a tool and before it runs (save point A)",
    "save-a-late": "save point A reaches the disk only after the tool has started (saved after the call, or "
                   "in a thread nothing waits for)",
    "no-save-b": "nothing is saved after a tool's result is recorded and before the model is called (save point B)",
    "no-final-save": "nothing is saved after the model's final answer",
    "stopped-early": "run_agent returns before the model's final answer, with the model still asking for tools",
    "pending-shape": "pendingToolUse is not exactly the {id, name, input} of the tool_use block",
    "pending-not-set": "the save before a tool runs leaves pendingToolUse empty, so the file never names that call",
    "pending-not-cleared": "pendingToolUse still names a call whose result is already recorded",
    "in-place": "the checkpoint is written over in place, so a crash mid-write leaves part of a file",
    "buffered-rename": "the temp file is renamed over the checkpoint before its bytes have left Python's buffer",
    "deleted-first": "the old checkpoint is deleted (or renamed away) before the new one is renamed in, leaving a "
                     "moment with none",
    "folder-swap": "the checkpoint folder is swapped with a new one by two renames, leaving a moment with no folder",
    "temp-elsewhere": "the temp file is written in another folder than checkpoint.json, so the rename may be a copy",
    "temp-cross-device": "the temp file is made in the system temp folder, another file system, and a rename "
                         "from there into the checkpoint folder is refused (EXDEV)",
    "temp-copied": "the temp file is moved in from the system temp folder, another file system, so the move "
                   "copies its bytes into checkpoint.json in place",
    "mixed": "the file matches no save the loop made",
    "emptied-before-rename": "the temp file is emptied again (opened with \"w\" a second time, or truncated) "
                             "after its data was written, and then renamed over the checkpoint",
    "result-after-save": "the save after a tool returns runs before its result is appended to messages, so the file "
                         "counts the call as done but holds no result for it",
    "counts-turns": "`turns` does not count the tool results the file's messages hold",
    "counts-tokens": "`tokensUsed` is not the spend of the model responses the file holds",
    "counts-early": "the save runs before the model's message is appended, so `tokensUsed` counts a response "
                    "the file does not hold yet",
}


@dataclass
class Finding:
    invariant: str
    detail: str
    resume: str
    cause: str = ""   # a key of CAUSES, when the file alone says why
    # The closing sentence of ``detail`` that blames a save the loop never made ("Nothing was saved
    # after ..."): true after a kill, not after a power cut that undid a save the loop did make.
    blames: str = ""


def _results(messages: list) -> list[str]:
    return [tool_id for message in messages for tool_id in tool_result_ids(message)]


def _spent(window: Window, n: int) -> int:
    """What the first ``n`` of ``window.responses`` cost (all of them, if there are fewer)."""
    if window.spent is not None:
        return window.spent[min(n, len(window.responses))]
    return sum(spend(r) for r in window.responses[:n])


def parse(raw: Optional[bytes]) -> tuple[Any, Optional[str]]:
    """The file's JSON, or why it cannot be read."""
    if raw is None:
        return None, "missing"
    if not raw:
        return None, "it is empty: no bytes had reached it since it was created or last emptied"
    if not raw.rstrip().endswith(b"}"):
        # A torn or half-written object: decoding 100 KiB to learn that would be slow.
        last = raw.rstrip()[-1:].decode("latin-1") or "nothing"
        return None, f"it stops before the closing brace of the JSON object (the last byte is {last!r})"
    try:
        return json.loads(raw.decode("utf-8")), None
    except UnicodeDecodeError as exc:
        return None, f"its bytes are not UTF-8 ({exc.reason} at byte {exc.start})"
    except json.JSONDecodeError as exc:
        return None, f"json.loads raises JSONDecodeError: {exc.msg} (line {exc.lineno}, column {exc.colno})"
    except (ValueError, RecursionError) as exc:
        # Well-formed JSON that Python's json.loads still refuses, as a resume's load would: an integer past
        # int()'s digit limit (ValueError), lists or objects nested past the recursion limit (RecursionError).
        return None, f"json.loads raises {type(exc).__name__}: {str(exc)[:200]}"


def parse_cached(raw: Optional[bytes], parsed: Optional[dict]) -> tuple[Any, Optional[str]]:
    """:func:`parse`, remembered in ``parsed`` (keyed by the bytes) when a cache is given."""
    if parsed is None:
        return parse(raw)
    if raw not in parsed:
        parsed[raw] = parse(raw)
    return parsed[raw]


def no_checkpoint(window: Any, started: str) -> Optional[Finding]:
    """What a crash state with no checkpoint.json at all breaks (None while that is still fine).
    ``started`` names, in words, the tool call(s) in ``window.started``."""
    if window.absent_ok:
        return None
    if window.started:
        return Finding("TRACE", f"{started} had started, but there is no checkpoint.json at all",
                       "resume finds nothing, starts the task over from zero, and runs the tool again")
    return Finding("PARSE", "there is no checkpoint.json at all, though a save had completed",
                   "resume finds nothing and starts the task over from zero, repeating every tool call "
                   "that already ran")


def shape_finding(raw: Optional[bytes], data: Any, error: Optional[str],
                  problems_of: Callable[[Any], list] = field_problems) -> Optional[Finding]:
    """PARSE or FIELDS for a checkpoint that is there but cannot be read as the six fields (None if
    it can). ``problems_of`` lists what is wrong with the fields (a level may have its own rules)."""
    if error:
        what = "0 bytes" if not raw else f"{len(raw):,} bytes that are not one complete JSON document"
        return Finding("PARSE", f"checkpoint.json holds {what}; {error}",
                       "resume cannot read the file; it was the only copy of the run's state, so the task is lost")
    if not isinstance(data, dict):
        return Finding("PARSE", f"checkpoint.json holds a JSON {type(data).__name__}, not an object",
                       "resume cannot find any of the six fields")
    problems = problems_of(data)
    if problems:
        return Finding("FIELDS", "; ".join(problems),
                       "resume reads a field that is not there, or trusts a value of the wrong kind",
                       "pending-shape" if problems_of is field_problems
                       and all(p.startswith("`pendingToolUse`") for p in problems) else "")
    messages = data["messages"]
    if set(map(type, messages)) - {dict} and not all(isinstance(m, dict) for m in messages):
        return Finding("FIELDS", "`messages` holds something that is not a message object",
                       "resume cannot send these messages to the model")
    return None


class _Facts:
    """What :func:`check` reads from a list of messages before it compares anything.

    ``answered[i]``: the tool_result ids in ``messages[i]``; ``results``: all of them, in order;
    ``assistants``: how many assistant messages; ``unpaired``: the first i whose assistant
    message asks for a tool_use that ``messages[i + 1]`` does not answer (None if none).
    """

    __slots__ = ("messages", "answered", "results", "counts", "assistants_by", "unpaired_by")

    def __init__(self) -> None:
        self.messages: list = []
        self.answered: list = []
        self.results: list = []
        self.counts: list = []         # counts[i]: len(results) over messages[:i + 1]
        self.assistants_by: list = []  # assistants_by[i]: assistant messages in messages[:i + 1]
        self.unpaired_by: list = []    # unpaired_by[i]: the first unpaired j with j + 1 <= i

    @property
    def assistants(self) -> int:
        return self.assistants_by[-1] if self.assistants_by else 0

    @property
    def unpaired(self) -> Optional[int]:
        return self.unpaired_by[-1] if self.unpaired_by else None

    def extended(self, messages: list) -> "_Facts":
        """The facts of ``messages``, reusing those of the messages it shares with this list.

        Shared means the same objects (``is``), and only decoded files come here (see
        :func:`_facts_for`), which nothing changes: along a journal each crash state's messages
        are the last one's plus a few, and those few are all that is read.
        """
        old = self.messages
        k = min(len(old), len(messages))
        if k:
            same = list(map(operator.is_, old[:k], messages[:k]))
            if not same[-1] or not all(same):
                k = same.index(False)
        out = _Facts()
        out.messages = list(messages)
        out.answered = self.answered[:k]
        out.counts = self.counts[:k]
        out.results = self.results[:out.counts[-1]] if k else []
        out.assistants_by = self.assistants_by[:k]
        out.unpaired_by = self.unpaired_by[:k]
        for i in range(k, len(messages)):
            m = messages[i]
            ids = tool_result_ids(m)
            out.answered.append(ids)
            out.results.extend(ids)
            out.counts.append(len(out.results))
            out.assistants_by.append((out.assistants_by[-1] if i else 0) + (m.get("role") == "assistant"))
            unpaired = out.unpaired_by[-1] if i else None
            if unpaired is None and i and messages[i - 1].get("role") == "assistant" \
                    and any(b.get("id") not in ids for b in tool_use_blocks(messages[i - 1].get("content"))):
                unpaired = i - 1
            out.unpaired_by.append(unpaired)
        return out


_FACTS = object()  # the key under which check() keeps its last _Facts in a ``parsed`` cache


def _facts_for(messages: list, parsed: Optional[dict]) -> _Facts:
    """The facts of ``messages``, built on the last ones when ``parsed`` is given.

    ``parsed`` holds files decoded for one exploration, which nobody changes, so a message object
    seen before still holds what it held. Without it (a caller's own data, which it may change
    between two calls) everything is read afresh.
    """
    if parsed is None:
        return _Facts().extended(messages)
    facts = parsed.get(_FACTS) or _Facts()
    facts = parsed[_FACTS] = facts.extended(messages)
    return facts


@dataclass
class _Read:
    """One checkpoint as the rules below read it: its fields, what its messages hold, the crash point."""

    data: dict
    window: Window
    facts: Any

    @property
    def messages(self) -> list:
        return self.data["messages"]

    @property
    def pending(self) -> Any:
        return self.data["pendingToolUse"]


def check(raw: Optional[bytes], window: Window, parsed: Optional[dict] = None) -> Optional[Finding]:
    """The first invariant ``raw`` (the checkpoint's bytes, or None if absent) breaks in ``window``.

    ``parsed`` may carry a cache of ``parse`` results keyed by the raw bytes. The rules are tried in
    order (:data:`_RULES`): the first that finds something names the file's trouble.
    """
    data, error = parse_cached(raw, parsed)
    if error == "missing":
        return no_checkpoint(window, f"tool `{window.tool_name}`")
    unreadable = shape_finding(raw, data, error)
    if unreadable is not None:
        return unreadable
    read = _Read(data, window, _facts_for(data["messages"], parsed))
    return next((found for rule in _RULES if (found := rule(read)) is not None), None)


def _counts(read: _Read) -> Optional[Finding]:
    data, window, results, n_assistant = read.data, read.window, read.facts.results, read.facts.assistants
    if data["turns"] > len(results) and read.pending is None and (lost := _trace(read)) is not None:
        # The call was counted and taken out of pendingToolUse, but its result is not in messages: the
        # save ran before the append. The lost result is the fault (the count only follows from it).
        return Finding("TRACE", f"{lost.detail}, though `turns` is {data['turns']}: the call was counted as done "
                       "and cleared from pendingToolUse, but this save ran before its result was appended to "
                       "messages", "resume finds a tool_use with no result and nothing pending: the API refuses "
                       "the transcript, and a resume that asks the model again may run the tool a second time",
                       "result-after-save")
    if data["turns"] != len(results):
        return Finding("COUNTS", f"`turns` is {data['turns']} but messages hold {len(results)} tool "
                       f"result{'s' if len(results) != 1 else ''}",
                       f"resume counts on from turn {data['turns']}, so a maximum-turn cap fires "
                       f"{'early' if data['turns'] > len(results) else 'late'}", "counts-turns")
    expected_tokens = _spent(window, n_assistant)
    if n_assistant > len(window.responses) or data["tokensUsed"] == expected_tokens:
        return None
    ahead = _spent(window, n_assistant + 1)
    if n_assistant < len(window.responses) and data["tokensUsed"] == ahead:
        return Finding("COUNTS", f"`tokensUsed` is {data['tokensUsed']}, the spend of {n_assistant + 1} model "
                       f"response{'s' if n_assistant else ''}, but the file's messages hold {n_assistant}: this save ran before the "
                       "model's latest message was appended",
                       "resume has paid for a response it cannot see, and asks the model for it again",
                       "counts-early")
    return Finding("COUNTS", f"`tokensUsed` is {data['tokensUsed']} but the {n_assistant} model responses "
                   f"recorded spent {expected_tokens} (input + output + cache tokens of each, the first included)",
                   "resume starts from the wrong spend, so a spend budget trips at the wrong moment",
                   "counts-tokens")


def _unpaired(read: _Read) -> Optional[Finding]:
    if read.facts.unpaired is None:
        return None
    i, messages = read.facts.unpaired, read.messages
    block = next(b for b in tool_use_blocks(messages[i].get("content")) if b.get("id") not in read.facts.answered[i + 1])
    return Finding("PAIRING", f"messages[{i}] asks for tool `{block.get('name')}` ({block.get('id')}) "
                   "but the message right after it does not hold its result",
                   "resume sends the API a tool_use without its tool_result: a 400 error")


def _pending_shape(pending: dict, want: dict) -> Finding:
    """PAIRING, for pendingToolUse that names the right call in the wrong shape."""
    extra = sorted(set(pending) - set(want))
    missing_keys = sorted(set(want) - set(pending))
    parts = []
    if extra:
        parts.append(f"it also carries {', '.join(f'`{k}`' for k in extra)}")
    if missing_keys:
        parts.append(f"it lacks {', '.join(f'`{k}`' for k in missing_keys)}")
    for key in ("name", "input"):
        if key in pending and key in want and pending[key] != want[key]:
            got = json.dumps(pending[key], default=repr)
            shown = f"its {key} is {got[:60]} where the block's is {json.dumps(want[key], default=repr)[:60]}"
            if isinstance(pending[key], str) and _json_of(pending[key]) == want[key]:
                shown += " (the block's value turned into a string of JSON)"
            parts.append(shown)
    whole = ("; this looks like the whole tool_use block copied in" if extra == ["type"] and not missing_keys
             else "")
    would = ("a resume that checks the shape refuses the file; one that does not hands the block's extra keys on "
             "as if they were the call" if extra else
             "a resume that checks the shape refuses the file; one that does not cannot re-run the call as the "
             "model asked for it" if missing_keys else
             "a resume that re-runs the call gives the tool other arguments than the model asked for, and the "
             "file disagrees with the tool_use block it stands for")
    return Finding("PAIRING", f"pendingToolUse names the right call (`{want['name']}`, {want['id']}), but "
                   f"{' and '.join(parts)}{whole}. The protocol keeps exactly id, name and input, as the "
                   "model gave them", would, "pending-shape")


def _json_of(text: str) -> Any:
    """``text`` parsed as JSON, or a marker that equals nothing when it is not JSON."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # (nested past the interpreter's depth: not JSON anyone can read)
        return object()


def _pending(read: _Read) -> Optional[Finding]:
    messages, pending = read.messages, read.pending
    last_blocks = tool_use_blocks(messages[-1].get("content")) if messages and messages[-1].get("role") == "assistant" else []
    if last_blocks:
        want = {"id": last_blocks[0].get("id"), "name": last_blocks[0].get("name"), "input": last_blocks[0].get("input")}
        if isinstance(pending, dict) and pending.get("id") == want["id"] and pending != want:
            return _pending_shape(pending, want)
        if pending != want:
            return Finding("PAIRING", f"the last message asks for `{want['name']}` ({want['id']}) but pendingToolUse is "
                           f"{json.dumps(pending)[:120]}",
                           "resume cannot tell which call is dangling, so it cannot reconcile it",
                           "pending-not-set" if pending is None else "")
    elif pending is not None:
        return Finding("PAIRING", f"pendingToolUse names `{pending.get('name')}` ({pending.get('id')}) but the last "
                       "message is not the assistant turn that asked for it",
                       "resume would reconcile a call whose result is already recorded, and may run it twice",
                       "pending-not-cleared" if pending.get("id") in read.facts.results else "")
    return None


def _trace(read: _Read) -> Optional[Finding]:
    window, pending, results = read.window, read.pending, read.facts.results
    on_disk = set(results) | ({pending.get("id")} if isinstance(pending, dict) else set())
    missing = [tid for tid in window.started if tid not in on_disk]
    if not missing:
        return None
    return Finding("TRACE", f"tool `{window.tool_name}` had started ({missing[-1]}), but the file says "
                   f"nothing about it: it holds {len(results)} results and pendingToolUse is "
                   f"{json.dumps(pending)[:60]}",
                   "resume has no idea a tool call was in flight: it asks the model again and may run "
                   "the tool a second time (publishing the table twice)",
                   "no-save-a" if window.phase == "tool" else "")


def _fresh(read: _Read) -> Optional[Finding]:
    window, pending, results = read.window, read.pending, read.facts.results
    if not (window.fresh and (pending is not None or len(results) < window.recorded_results)):
        return None
    if isinstance(pending, dict):
        return Finding("FRESH", f"the model was called with {window.recorded_results} tool "
                       f"result{'s' if window.recorded_results != 1 else ''}, but the file "
                       f"still holds {len(results)} and lists `{pending.get('name')}` as pending: nothing was "
                       "saved between recording its result and calling the model (save point B)",
                       "resume would treat a finished tool as unfinished and may run it again", "no-save-b",
                       blames=": nothing was saved between recording its result and calling the model (save point B)")
    return Finding("FRESH", f"the model was called with {window.recorded_results} tool "
                   f"result{'s' if window.recorded_results != 1 else ''}, but the file "
                   f"holds {len(results)} and pendingToolUse is {json.dumps(pending)[:60]}",
                   "resume would treat a finished tool as unfinished and may run it again", "no-save-b")


def _whole(read: _Read) -> Optional[Finding]:
    data, window = read.data, read.window
    snapshot = {k: data[k] for k in FIELDS}
    if snapshot in window.allowed:
        return None
    older = read.facts.assistants < max((sum(1 for m in a["messages"] if m.get("role") == "assistant")
                                         for a in window.allowed), default=0)
    if older:
        return _older_save(data, window)
    return Finding("WHOLE", "the file is not any state the loop saved: a mix of two saves, or fields that do "
                   "not match the conversation", "resume continues from a state that never existed", "mixed")


# The invariants a readable checkpoint is held to, in the order check tries them (the first found wins).
_RULES: tuple = (_counts, _unpaired, _pending, _trace, _fresh, _whole)


def _scene(data: dict) -> str:
    """Which save of the loop a checkpoint is, in the lesson's words."""
    messages = data.get("messages") or []
    turns = len(_results(messages))
    pending = data.get("pendingToolUse")
    if isinstance(pending, dict):
        return f"the save from before `{pending.get('name')}` ran (turn {turns + 1}, save point A)"
    last = messages[-1] if messages else {}
    if last.get("role") == "assistant" and not tool_use_blocks(last.get("content")):
        return "the final save"
    if turns:
        return f"the save after turn {turns}'s tool returned (turn {turns}, save point B)"
    return "the first state, with no tool run yet"


def _older_save(data: dict, window: Window) -> Finding:
    """WHOLE, for a file that is a real save of the loop but an old one: say which save is missing."""
    newest = max(window.allowed, key=lambda a: (len(a["messages"]), a["pendingToolUse"] is None))
    have, want = _scene(data), _scene(newest)
    if window.phase in ("done", "final") and want == "the final save":
        return Finding("WHOLE", f"checkpoint.json is an older save: run_agent had the model's final answer, but the "
                       f"file still holds {have}. The final answer was never saved",
                       "resume finds an unfinished task, calls the model again for an answer it already had, and "
                       "pays for that call twice", "no-final-save", blames=". The final answer was never saved")
    pending = data.get("pendingToolUse")
    if isinstance(pending, dict) and len(_results(newest["messages"])) > len(_results(data.get("messages") or [])):
        return Finding("WHOLE", f"checkpoint.json is an older save: `{pending.get('name')}` had returned and its "
                       f"result was recorded, but the file still holds {have}, which lists it as pending. Nothing "
                       "was saved after the tool returned (save point B)",
                       "resume sees the tool as interrupted and runs it again, though it had finished", "no-save-b",
                       blames=". Nothing was saved after the tool returned (save point B)")
    missed = ("no-save-a" if isinstance(newest.get("pendingToolUse"), dict) else
              "no-final-save" if want == "the final save" else "no-save-b")
    return Finding("WHOLE", f"checkpoint.json is an older save: it holds {have}, but the loop had already "
                   f"completed {want}", "resume continues from behind what already happened, and repeats it", missed)


def final_save_problem(raw: Optional[bytes], returned: Any) -> str:
    """Why the checkpoint a finished run left behind is not its final save, or "" when it is.

    The loop appends the model's final answer, saves, and only then returns: so once run_agent has
    returned, the file on disk holds the same six fields as the state it returned.
    """
    if raw is None:
        return ("run_agent returned, but it left no checkpoint.json at all. The loop saves once more after the "
                "model's final answer, so that a finished task is on disk as finished")
    data, error = parse(raw)
    if error or not isinstance(data, dict) or field_problems(data):
        return "run_agent returned, but the checkpoint.json it left is not a whole save of the six fields"
    if not isinstance(returned, dict) or not all(k in returned for k in FIELDS):
        return ""  # what run_agent returned is judged by its own check
    if {k: data[k] for k in FIELDS} == {k: returned[k] for k in FIELDS}:
        return ""
    return (f"run_agent returned the finished task, but checkpoint.json still holds {_scene(data)}: the model's "
            "final answer was never saved. A resume from this file would ask the model again for an answer "
            "it already gave")
