"""Level 5: turns that name several tools at once, and what each crash state must then hold.

The protocol of the parallel level (README of exercises/level5 says the same to the learner):

* ``pendingToolUse`` is ``null`` when nothing is pending, otherwise a list of ``{id, name, input}``,
  one per call the model named whose result is not yet in ``messages`` (an empty list reads as
  ``null``; the order of the list does not matter).
* Save point A: the assistant message is appended and *every* call it names is pending; save.
* Each result is recorded the moment its tool returns: the first result of a turn starts the user
  message that follows the assistant message, each later one is added to that same message (the
  Messages API wants all of a turn's results in the one user message right after it), the call
  leaves ``pendingToolUse``, ``turns`` goes up by one, and the loop saves. After the last result
  of the turn nothing is pending (``null``).
* ``turns`` counts tool results, as everywhere in the kit; ``tokensUsed`` counts every response.

The checker here is structural, so a loop may run the calls in any order: at each crash point the
file must be a state the loop could have saved, holding every call that started (TRACE), every
result that came back before the loop moved on (KEPT), each result once (ONCE), and by the time the
model is called, everything (FRESH).
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from grader.levels import api
from grader.levels.api import (check_trace, CHECKPOINT_NAME, Exploration, field_problems as protocol_field_problems,
                               FIELDS, Finding, initial_state, ISSUE_TYPES, LevelModule, loop_timeout, NESTED_FOLDER,
                               no_checkpoint, NON_IDEMPOTENT_TOOLS, parse_cached, random_tool_id, random_usage,
                               recorded_run, rerun_after_crashes, result_strategy, Scenario, shape_finding, snapshot,
                               spend, text_strategy, TICKET_TASK, TICKET_TOOLS, tool_input_strategy, tool_result_ids,
                               tool_use_blocks, usage_strategy, Violation, Window)

# The course's tools, with tickets listed a month at a time (three months: three calls in one turn)
# and a second tool that must not run twice.
TOOLS = [
    {"name": "list_tickets", "description": "List the support tickets opened in one month.",
     "input_schema": {"type": "object", "properties": {"month": {"type": "string"}}, "required": ["month"]}},
    *TICKET_TOOLS[1:],
    {"name": "email_summary", "description": "Email the table to the support leads (not idempotent).",
     "input_schema": {"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
                      "required": ["to", "body"]}},
]


# -- scenarios ---------------------------------------------------------------------------------------

def from_parallel_turns(task: str, turns: list, final_text: str = "Done.", *, seed: int = 0,
                        usages: Optional[list] = None, name: str = "parallel conversation",
                        texts: Optional[list] = None, tools: Optional[list] = None,
                        non_idempotent: Iterable[str] = ()) -> Scenario:
    """A scenario from turns, each a list of ``(tool name, tool input, result)``: one tool_use per item.

    ``Scenario.results`` holds one result per tool_use block, in the order the blocks appear, which
    is how :class:`~grader.engine.scripted.ScriptedTools` finds the result of a call.
    """
    rng = random.Random(seed)
    # Two calls with the same name and input cannot be told apart from outside (which one ran
    # first?), so a repeated call gets a numbered input of its own.
    seen: set = set()
    unique = []
    for calls in turns:
        unique.append([])
        for tool, tool_input, result in calls:
            key, n, original = (tool, json.dumps(tool_input, sort_keys=True)), 0, tool_input
            while key in seen:
                n += 1
                tool_input = dict(original, call=n) if isinstance(original, dict) else {"input": original, "call": n}
                key = (tool, json.dumps(tool_input, sort_keys=True))
            seen.add(key)
            unique[-1].append((tool, tool_input, result))
    turns = unique
    if tools is None:
        names = sorted({call[0] for turn in turns for call in turn}) or ["noop"]
        tools = [{"name": n, "description": f"scripted tool {n}", "input_schema": {"type": "object"}} for n in names]
    responses, results = [], []
    for i, calls in enumerate(turns):
        content = [{"type": "text", "text": texts[i]}] if texts and texts[i] else []
        for tool, tool_input, result in calls:
            content.append({"type": "tool_use", "id": random_tool_id(rng), "name": tool, "input": tool_input})
            results.append(result)
        usage = usages[i] if usages else random_usage(rng, 100 * i, cached=i % 2 == 1)
        responses.append({"id": f"msg_{i:02d}", "type": "message", "role": "assistant", "stop_reason": "tool_use",
                          "content": content, "usage": usage})
    usage = usages[len(turns)] if usages else random_usage(rng, 100 * len(turns), cached=True)
    responses.append({"id": "msg_end", "type": "message", "role": "assistant", "stop_reason": "end_turn",
                      "content": [{"type": "text", "text": final_text}], "usage": usage})
    return Scenario(name, task, tools, responses, results, seed, frozenset(non_idempotent))


def parallel_tickets(seed: int = 0, tickets: int = 240) -> Scenario:
    """The course's task with parallel calls: three months listed at once, two classify batches at once,
    then the table published and emailed at once (both not idempotent), then the answer.

    Each month's list is several KiB, so one save takes more than one 8 KiB buffer flush.
    """
    rng = random.Random(seed)
    subjects = ["Charged twice", "Can't sign in", "Export crashes", "Dark mode please", "Parcel late",
                "Refund not received", "Password reset loop", "Café menu garbled: ☕"]
    months = ["2026-07", "2026-08", "2026-09"]
    rows = {m: [] for m in months}
    for i in range(tickets):
        month = months[i % 3]
        rows[month].append({"id": f"T-{4000 + i}", "subject": rng.choice(subjects), "opened": f"{month}-{rng.randint(10, 28)}",
                            "body": " ".join(rng.choice(["app", "order", "card", "account", "error", "ünïcode"])
                                             for _ in range(rng.randint(8, 20)))})
    ids = [r["id"] for m in months for r in rows[m]]
    kinds = ISSUE_TYPES
    labels = {tid: rng.choice(kinds) for tid in ids}
    half = len(ids) // 2
    counts = {t: sum(1 for v in labels.values() if v == t) for t in kinds}
    table = "| issue type | tickets |\n|---|---|\n" + "".join(f"| {t} | {n} |\n" for t, n in sorted(counts.items()))
    turns = [
        [("list_tickets", {"month": m}, json.dumps(rows[m], ensure_ascii=False)) for m in months],
        [("classify_tickets", {"ticket_ids": ids[:half]}, json.dumps({k: labels[k] for k in ids[:half]})),
         ("classify_tickets", {"ticket_ids": ids[half:]}, json.dumps({k: labels[k] for k in ids[half:]}))],
        [("publish_table", {"title": "Q3 tickets by issue type", "markdown": table},
          json.dumps({"posted": True, "message_id": f"msg_{rng.randint(10 ** 5, 10 ** 6)}"})),
         ("email_summary", {"to": "support-leads@example.com", "body": table},
          json.dumps({"sent": True, "recipients": 4}))],
    ]
    texts = ["I'll list the three months of the quarter at once.",
             f"There are {tickets} tickets. I'll classify them in two batches.",
             "Here is the table; I'll publish it and email it to the leads."]
    return from_parallel_turns(TICKET_TASK, turns, "Done. Q3 tickets by issue type:\n\n" + table, seed=seed,
                               name="support-tickets-parallel", texts=texts, tools=TOOLS,
                               non_idempotent=NON_IDEMPOTENT_TOOLS | {"email_summary"})


def parallel_conversations(min_turns: int = 0, max_turns: int = 6):
    """A Hypothesis strategy of scenarios whose turns name one to three tools each."""
    from hypothesis import strategies as st

    @st.composite
    def draw_scenario(draw: Any) -> Scenario:
        n = draw(st.integers(min_turns, max_turns))
        names = draw(st.lists(st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12), min_size=1,
                              max_size=3, unique=True))
        turns = [[(draw(st.sampled_from(names)), draw(tool_input_strategy), draw(result_strategy()))
                  for _ in range(draw(st.integers(1, 3)))] for _ in range(n)]
        usages = [draw(usage_strategy()) for _ in range(n + 1)]
        task = draw(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60))
        final = draw(text_strategy) or "Done."
        seed = draw(st.integers(0, 2 ** 31))
        calls = sum(len(t) for t in turns)
        scenario = from_parallel_turns(task, turns, final, seed=seed, usages=usages,
                                       name=f"a generated conversation of {n} turns and {calls} tool calls")
        json.dumps(scenario.responses)
        return scenario

    return draw_scenario()


# -- the protocol's states ----------------------------------------------------------------------------

def state_after(task: str, responses: list, results: dict, recorded: Optional[list] = None, final: bool = False,
                base: Optional[dict] = None, pieces: Optional[dict] = None) -> dict:
    """The state a correct loop saves once ``responses`` have arrived.

    Every turn before the last is complete. Of the last response's calls, ``recorded`` lists the
    ids whose results are in (None: all of them). ``final``: the last response is the answer.
    ``base``, when given, is this function's state for ``responses[:-1]`` (all complete): only the
    last turn is built then, and the earlier messages are shared with ``base``, not copied.
    ``pieces``: a dict that keeps each message part as JSON gives it back, for states built again
    and again from the same responses and results (treat the states as read-only then).
    """
    if base is None:
        base = snapshot(initial_state(task))
        for response in responses[:-1]:
            base = _after(base, response, results, None, False, pieces)
    if not responses:
        return base
    return _after(base, responses[-1], results, recorded, final, pieces)


def _after(base: dict, response: dict, results: dict, recorded: Optional[list], final: bool,
           pieces: Optional[dict] = None) -> dict:
    """``base`` (a saved state) with one more response, and of its calls the results in ``recorded``.

    Each part goes through JSON on its own (what a round trip of the whole state would give of it),
    kept in ``pieces`` when given, so a state built again from the same parts shares them."""
    pieces = {} if pieces is None else pieces
    state = dict(base, tokensUsed=base["tokensUsed"] + spend(response))
    added = [_piece(pieces, ("assistant", id(response)), lambda: {"role": "assistant", "content": response["content"]})]
    pending = None
    if not final:
        blocks = tool_use_blocks(response.get("content"))
        ids = [b["id"] for b in blocks] if recorded is None else list(recorded)
        if ids:
            added.append({"role": "user", "content": [
                _piece(pieces, ("result", i), lambda i=i: {"type": "tool_result", "tool_use_id": i, "content": results[i]})
                for i in ids]})
            state["turns"] = base["turns"] + len(ids)
        waiting = [{"id": b["id"], "name": b["name"], "input": b["input"]} for b in blocks if b["id"] not in ids]
        pending = waiting or None
    state["pendingToolUse"] = json.loads(json.dumps(pending))
    state["messages"] = base["messages"] + added
    return state


def _complete(memo: dict, task: str, responses: list, results: dict, upto: int) -> dict:
    """The state a correct loop saves once the first ``upto`` responses are in, every call answered,
    kept in ``memo`` (one run's): built on the one before it, so a run builds each turn once."""
    key = ("complete", upto)
    if key not in memo:
        base = _complete(memo, task, responses, results, upto - 1) if upto else None
        memo[key] = state_after(task, responses[:upto], results, base=base, pieces=memo)
    return memo[key]


def _piece(pieces: dict, key: tuple, build: Callable[[], Any]) -> Any:
    """``build()`` as a JSON round trip gives it back, made once per ``key``."""
    if key not in pieces:
        pieces[key] = json.loads(json.dumps(build()))
    return pieces[key]


def normalize(state: Any) -> Any:
    """The state with the freedoms the protocol allows taken out: the order of ``pendingToolUse`` and of
    one turn's tool results, an empty pending list, an empty user message waiting for results."""
    if not isinstance(state, dict):
        return state
    # Copied only where it changes (the top level, the message list, a reordered message): the
    # states compared here are large, and a deep copy of each was most of level 5's checking time.
    out = dict(state)
    pending = out.get("pendingToolUse")
    if isinstance(pending, list):
        out["pendingToolUse"] = sorted(pending, key=lambda p: json.dumps(p, sort_keys=True)) or None
    messages = out.get("messages")
    if isinstance(messages, list):
        messages = out["messages"] = list(messages)
        if messages and isinstance(messages[-1], dict) and messages[-1].get("role") == "user" \
                and messages[-1].get("content") == [] and len(messages) > 1:
            messages.pop()
        for i, message in enumerate(messages):
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, list) and content and all(isinstance(b, dict) and b.get("type") == "tool_result"
                                                             for b in content):
                messages[i] = dict(message, content=sorted(content, key=lambda b: str(b.get("tool_use_id"))))
    return out


def same_state(got: Any, want: Any) -> bool:
    return normalize(got) == normalize(want)


# -- windows -----------------------------------------------------------------------------------------

@dataclass
class ParallelWindow(Window):
    """A :class:`~grader.engine.invariants.Window` for turns with several calls.

    ``allowed`` holds whole states the file may equal; ``partial`` says the file may also be the
    current turn with some of its results in: any set holding ``kept`` and within ``results``.
    """

    task: str = ""
    results: dict = field(default_factory=dict)   # id -> result, for every call that has returned
    kept: frozenset = frozenset()                 # ids whose result must be on disk by now
    partial: bool = False
    names: list = field(default_factory=list)     # the current turn's tool names, in order
    calls: int = 0                                # calls started in the current turn
    current: str = ""                             # the tool running, or the one that just returned
    # Shared by every window of one run: normalised states, built once. A correct loop's file at a
    # partial point is checked against a state rebuilt from the whole history, and the same few
    # states come up at every crash point of a turn.
    memo: dict = field(default_factory=dict, repr=False, compare=False)

    def normalized(self, state: dict) -> dict:
        """``normalize(state)`` for a state this run's windows hold (kept alive by them, so ``id`` is safe)."""
        key = ("allowed", id(state))
        if key not in self.memo:
            self.memo[key] = normalize(state)
        return self.memo[key]

    def partial_state(self, on_turn: list) -> dict:
        """The normalised state a correct loop saves with ``on_turn``'s results of the current turn in.
        ``results`` only grows through a run, so its size tells which results a window had."""
        key = ("partial", len(self.responses), len(self.results), tuple(on_turn))
        if key not in self.memo:
            base = _complete(self.memo, self.task, self.responses, self.results, len(self.responses) - 1)
            self.memo[key] = normalize(state_after(self.task, self.responses, self.results, recorded=on_turn,
                                                   base=base, pieces=self.memo))
        return self.memo[key]

    def signature(self) -> tuple:
        return (self.phase, self.turn, tuple(self.started), tuple(self.results), self.kept, self.fresh,
                self.absent_ok, len(self.allowed), self.partial)

    def words(self) -> str:
        n = len(self.names)
        listed = ", ".join(f"`{x}`" for x in self.names)
        if self.phase == "A":
            return f"turn {self.turn}, save point A (the model named {n} call{'s' if n != 1 else ''}: {listed}; none has run yet)"
        if self.phase == "tool":
            back = len([i for i in self.results if i in self.turn_ids])
            return (f"turn {self.turn}, while `{self.current}` runs (call {self.calls} of {n}; "
                    f"{back} result{'s' if back != 1 else ''} of this turn back)")
        if self.phase == "B":
            return (f"turn {self.turn}, after `{self.current}` returned (call {self.calls} of {n}), "
                    "while its result is being recorded")
        if self.phase == "model":
            return f"turn {self.turn}, while the model is called with the {n} result{'s' if n != 1 else ''} of {listed}"
        return Window.words(self)

    @property
    def turn_ids(self) -> list:
        if not self.responses:
            return []
        return [b["id"] for b in tool_use_blocks(self.responses[-1].get("content"))]


def _match_start(blocks: list, started: list, name: str, tool_input: Any) -> Optional[str]:
    """The id of the call a tool_start belongs to (as ScriptedTools matches it), or None if it re-runs one."""
    normal = json.loads(json.dumps(tool_input))
    for b in blocks:
        if b["name"] == name and b["input"] == normal and b["id"] not in started:
            return b["id"]
    return None


def _match_end(blocks: list, started: list, ended: list, name: str) -> Optional[str]:
    """The id of the call a tool_end belongs to: the earliest started call of that name still running."""
    by_name = {b["id"]: b["name"] for b in blocks}
    for i in started:
        if i not in ended and by_name.get(i) == name:
            return i
    return None


def _calls_of(ops: list, blocks: list) -> tuple[dict, dict, dict]:
    """Which call each tool event belongs to (by op index, for its start and its end), and each call's result."""
    started_ids: list = []
    ended_ids: list = []
    start_of: dict = {}
    end_of: dict = {}
    scripted: dict = {}
    for op in ops:
        if op.kind == "tool_start":
            i = _match_start(blocks, started_ids, op.payload[0], op.payload[1])
            start_of[op.index] = i
            if i is not None:
                started_ids.append(i)
        elif op.kind == "tool_end":
            i = _match_end(blocks, started_ids, ended_ids, op.payload[0])
            end_of[op.index] = i
            if i is not None:
                ended_ids.append(i)
                scripted[i] = op.payload[1]
    return start_of, end_of, scripted


class _Progress:
    """How far a run had got, crash point by crash point: model calls made and answered, the calls
    started and ended, the results kept when the loop moved on, the tool running, whether it returned."""

    def __init__(self) -> None:
        self.m = self.ms = 0
        self.started: list = []
        self.ended: list = []
        self.kept: set = set()
        self.current, self.done, self.last_kind = "", False, ""

    def step(self, op: Any, start_of: dict, end_of: dict) -> None:
        kind = op.kind
        if kind in ("model_start", "tool_start"):
            self.kept = set(self.ended)
        if kind == "model_start":
            self.ms += 1
        elif kind == "model_end":
            self.m += 1
        elif kind in ("tool_start", "tool_end"):
            i = (start_of if kind == "tool_start" else end_of).get(op.index)
            if i is not None:
                (self.started if kind == "tool_start" else self.ended).append(i)
            self.current, self.last_kind = op.payload[0], kind
        elif kind == "run_end":
            self.done = True


def parallel_windows(ops: list, task: str) -> list:
    """For each crash point, what the loop had done and which files are acceptable there."""
    responses_all = [op.payload[1] for op in ops if op.kind == "model_end"]
    blocks = [b for r in responses_all for b in tool_use_blocks(r.get("content"))]
    early = snapshot(initial_state(task))

    start_of, end_of, scripted = _calls_of(ops, blocks)

    # Most crash points of a turn allow the same states: build each once (state_after copies the whole
    # history, so building it at every point made long conversations quadratic). The states are the
    # same for the same responses and the same recorded results, and ``ended`` only ever grows.
    # Each is built on the complete state of the turn before, itself built once (_complete), so a
    # run of n turns builds n turns, not n * n.
    built: dict = {}

    def state(upto: int, recorded: Optional[list] = None, final: bool = False) -> dict:
        key = (upto, len(ended), None if recorded is None else tuple(recorded), final)
        if key not in built:
            results = {i: scripted[i] for i in ended}
            base = _complete(memo, task, responses_all, results, upto - 1) if upto else None
            built[key] = state_after(task, responses_all[:upto], results, recorded=recorded, final=final, base=base,
                                     pieces=memo)
        return built[key]

    windows = []
    memo: dict = {}
    run = _Progress()
    ended = run.ended  # the calls whose results are in, so far (state() reads it)
    for k in range(len(ops) + 1):
        if k:
            run.step(ops[k - 1], start_of, end_of)
        m, ms, started, kept, current, done, last_kind = (run.m, run.ms, run.started, run.kept, run.current,
                                                          run.done, run.last_kind)
        got = responses_all[:m]
        results = {i: scripted[i] for i in ended}
        this_turn = [b for b in tool_use_blocks(got[-1].get("content"))] if got else []
        turn_ids = [b["id"] for b in this_turn]
        names = [b["name"] for b in this_turn]
        calls = sum(1 for i in started if i in turn_ids)
        common = dict(started=list(started), recorded_results=len(ended), responses=got, task=task,
                      results=results, kept=frozenset(kept), names=names, calls=calls, current=current, memo=memo)

        def complete(upto: int) -> list:
            return [state(upto)] if upto else [early]

        if done and this_turn:
            # The loop returned with the model still asking for tools (before its final answer): a
            # crash after that may find the last save it would have made there, and nothing else.
            w = ParallelWindow("done", m, [state(m, recorded=[i for i in turn_ids if i in ended])], False, **common)
        elif done:
            w = ParallelWindow("done", m, [state(m, final=True)], False, **common)
        elif m == 0:
            w = ParallelWindow("before-first-response", 0, [early], True, **common)
        elif ms > m:
            w = ParallelWindow("model", m, complete(m), False, fresh=True, **common)
            w.names = names
        elif not this_turn:
            w = ParallelWindow("final", m, complete(m - 1) + [state(m, final=True)], m == 1,
                               **common)
        elif calls == 0:
            w = ParallelWindow("A", m, complete(m - 1) + [state(m, recorded=[])], m == 1,
                               **common)
        else:
            phase = "B" if last_kind == "tool_end" else "tool"
            w = ParallelWindow(phase, m, [], False, partial=True, **common)
        windows.append(w)
    return windows


# -- the checker -----------------------------------------------------------------------------------

def _pending_list_problem(pending: Any) -> Optional[str]:
    """What is wrong with a level-5 ``pendingToolUse``: null, or a list of ``{id, name, input}``."""
    if pending is None:
        return None
    if not isinstance(pending, list):
        return (f"`pendingToolUse` is {json.dumps(pending)[:60]}; in this level it is null or a list "
                "of {id, name, input}, one for each call whose result is not recorded yet")
    if not all(isinstance(p, dict) and set(p) == {"id", "name", "input"} for p in pending):
        return f"`pendingToolUse` holds {json.dumps(pending)[:80]}; each item should be exactly {{id, name, input}}"
    return None


def _clipped(value: Any, width: int) -> str:
    """``value`` as JSON, cut to ``width`` characters with an ellipsis that says so."""
    text = json.dumps(value)
    return text if len(text) <= width else text[:width - 1] + "…"


def field_problems(data: Any) -> list:
    """Why ``data`` does not have the six fields, with ``pendingToolUse`` null or a list of calls."""
    return protocol_field_problems(data, pending_problem=_pending_list_problem)


@dataclass
class _Read:
    """One checkpoint as level 5's rules read it."""

    data: dict
    window: ParallelWindow

    def __post_init__(self) -> None:
        self.messages: list = self.data["messages"]
        self.pending: list = self.data["pendingToolUse"] or []
        self.pending_ids = [p["id"] for p in self.pending]
        self.recorded = [i for m in self.messages for i in tool_result_ids(m)]
        self.n_assistant = sum(1 for m in self.messages if m.get("role") == "assistant")
        # Where the last assistant message that named tools sits.
        self.last_tools = max((i for i, m in enumerate(self.messages) if m.get("role") == "assistant"
                               and tool_use_blocks(m.get("content"))), default=None)

    def turns(self) -> Iterable[tuple]:
        """``(index, the calls it named, the results right after it)`` of each assistant message."""
        for i, message in enumerate(self.messages):
            if message.get("role") != "assistant":
                continue
            named = [b.get("id") for b in tool_use_blocks(message.get("content"))]
            following = self.messages[i + 1] if i + 1 < len(self.messages) else None
            answered = tool_result_ids(following) if following is not None and following.get("role") == "user" else []
            yield i, named, answered

    def is_last_turn(self, i: int) -> bool:
        """The last turn that named tools, with nothing after its results: its calls may still be pending."""
        return i == self.last_tools and i + 2 >= len(self.messages)


def check_parallel(raw: Optional[bytes], window: ParallelWindow, parsed: Optional[dict] = None) -> Optional[Finding]:
    """The first level-5 invariant that the checkpoint ``raw`` breaks in ``window`` (None if it holds).

    The rules are tried in order (:data:`_RULES`); pendingToolUse's own trouble is told after TRACE
    and KEPT, which name the cause more plainly."""
    data, error = parse_cached(raw, parsed)
    if error == "missing":
        return no_checkpoint(window, f"{len(window.started)} tool call{'s' if len(window.started) != 1 else ''}")
    unreadable = shape_finding(raw, data, error, field_problems)
    if unreadable is not None:
        return unreadable
    read = _Read(data, window)
    return next((found for rule in _RULES if (found := rule(read)) is not None), None)


def _once(read: _Read) -> Optional[Finding]:
    recorded, pending_ids = read.recorded, read.pending_ids
    doubled = sorted({i for i in recorded if recorded.count(i) > 1})
    if doubled:
        return Finding("ONCE", f"the result of {doubled[0]} is recorded {recorded.count(doubled[0])} times",
                       "resume sends the API one tool_use answered twice: a 400 error")
    if len(set(pending_ids)) != len(pending_ids):
        return Finding("ONCE", f"pendingToolUse lists {json.dumps(pending_ids)}, one call more than once",
                       "resume would reconcile that call twice, and may run it twice")
    return None


def _counts(read: _Read) -> Optional[Finding]:
    data, recorded, n_assistant = read.data, read.recorded, read.n_assistant
    if data["turns"] != len(recorded):
        return Finding("COUNTS", f"`turns` is {data['turns']} but messages hold {len(recorded)} tool "
                       f"result{'s' if len(recorded) != 1 else ''} "
                       "(in this level turns counts tool results, one per call)",
                       f"resume counts on from {data['turns']}, so a cap on tool calls fires at the wrong moment")
    if n_assistant <= len(read.window.responses):
        expected = sum(spend(r) for r in read.window.responses[:n_assistant])
        if data["tokensUsed"] != expected:
            return Finding("COUNTS", f"`tokensUsed` is {data['tokensUsed']} but the {n_assistant} model responses "
                           f"recorded spent {expected}", "resume starts from the wrong spend")
    return None


def _pairing(read: _Read) -> Optional[Finding]:
    """A result no call asked for, or (before the last turn) a call with no result after it."""
    for i, named, answered in read.turns():
        strays = [a for a in answered if a not in named]
        if strays:
            return Finding("PAIRING", f"messages[{i + 1}] holds a result for {strays[0]}, which messages[{i}] never "
                           "asked for", "resume sends the API a tool_result with no tool_use: a 400 error")
        if read.is_last_turn(i):
            continue
        missing = [n for n in named if n not in answered]
        if missing:
            return Finding("PAIRING", f"messages[{i}] asks for {len(named)} calls, but the message right after it "
                           f"has no result for {missing[0]}",
                           "resume sends the API a tool_use without its tool_result: a 400 error")
    return None


def _trace(read: _Read) -> Optional[Finding]:
    on_disk = set(read.recorded) | set(read.pending_ids)
    lost = [i for i in read.window.started if i not in on_disk]
    if not lost:
        return None
    return Finding("TRACE", f"call {lost[-1]} had started, but the file says nothing about it: it is neither "
                   f"among the {len(read.recorded)} results nor in pendingToolUse",
                   "resume has no idea that call was made: it asks the model again, and a tool that posts or "
                   "emails runs a second time")


def _kept(read: _Read) -> Optional[Finding]:
    dropped = [i for i in read.window.kept if i not in read.recorded]
    if not dropped:
        return None
    return Finding("KEPT", f"the result of {dropped[0]} came back before the loop moved on (started another "
                   "tool or called the model), but the file does not hold it",
                   "resume sees that call as unfinished and runs it again, so a finished result is lost "
                   "and its work is done twice")


def _pending_calls(read: _Read) -> Optional[Finding]:
    """pendingToolUse against the calls of the last turn still waiting for a result."""
    pending, data = read.pending, read.data
    if read.last_tools is None:
        if not pending:
            return None
        return Finding("PAIRING", f"pendingToolUse lists {len(pending)} call{'s' if len(pending) != 1 else ''}, but no assistant message "
                       "asked for them", "resume would reconcile calls the model never made")
    for i, named, answered in read.turns():
        if not read.is_last_turn(i):
            continue
        waiting = [b for b in tool_use_blocks(read.messages[i].get("content")) if b.get("id") not in answered]
        want = sorted(waiting, key=lambda b: b.get("id"))
        have = sorted(pending, key=lambda p: str(p.get("id")))
        if [{"id": b.get("id"), "name": b.get("name"), "input": b.get("input")} for b in want] != have:
            return Finding(
                "PAIRING", f"the last turn named {len(named)} calls and {len(answered)} "
                f"result{' is' if len(answered) == 1 else 's are'} recorded, so pendingToolUse should list "
                f"{json.dumps([b.get('id') for b in want])}, but it is {_clipped(data['pendingToolUse'], 160)}",
                "resume cannot tell which calls are dangling, so it re-runs a finished one or forgets an "
                "unfinished one", "pending-not-cleared" if any(p.get("id") in answered for p in have) else "")
    return None


def _fresh(read: _Read) -> Optional[Finding]:
    window, pending, recorded = read.window, read.pending, read.recorded
    if not (window.fresh and (pending or len(recorded) < len(window.results))):
        return None
    return Finding("FRESH", f"the model was called with {len(window.results)} tool result"
                   f"{'s' if len(window.results) != 1 else ''}, but the file holds {len(recorded)} and "
                   f"{len(pending)} call{' is' if len(pending) == 1 else 's are'} still pending",
                   "resume would treat finished tools as unfinished and may run them again")


def _whole(read: _Read) -> Optional[Finding]:
    """The file is a state the loop saved, or a partial one of the current turn; else WHOLE."""
    window, data = read.window, read.data
    mine = normalize({k: data[k] for k in FIELDS})
    if any(mine == window.normalized(a) for a in window.allowed):
        return None
    if window.partial and read.n_assistant == window.turn and read.last_tools is not None:
        on_turn = [i for i in read.recorded if i in window.turn_ids]
        if all(i in window.results for i in on_turn) and mine == window.partial_state(on_turn):
            return None
    newest = max((sum(1 for m in a["messages"] if m.get("role") == "assistant") for a in window.allowed),
                 default=window.turn)
    detail = ("the file is an older save than the last one that completed" if read.n_assistant < newest else
              "the file is not any state the loop saves: a mix of two saves, a result that does not match its "
              "call, or fields that do not match the conversation")
    return Finding("WHOLE", detail, "resume continues from a state that never existed, or one behind what happened")


# Level 5's invariants, in the order check_parallel tries them (the first found wins).
_RULES: tuple = (_once, _counts, _pairing, _trace, _kept, _pending_calls, _fresh, _whole)


def calls_run_twice(ops: list) -> list:
    """(op index, tool name) of each tool start that ran a call the model named only once."""
    blocks = [b for op in ops if op.kind == "model_end" for b in tool_use_blocks(op.payload[1].get("content"))]
    started: list = []
    out = []
    for op in ops:
        if op.kind == "tool_start":
            i = _match_start(blocks, started, op.payload[0], op.payload[1])
            if i is None:
                out.append((op.index, op.payload[0]))
            else:
                started.append(i)
    return out


def check_kept(raw: Optional[bytes], window: ParallelWindow, parsed: Optional[dict] = None) -> Optional[Finding]:
    """KEPT on its own: a crash state can lose a started call (TRACE) and a returned result at once,
    and each is its own lesson, so the second is looked for even where the first is reported."""
    data, error = parse_cached(raw, parsed)
    if error or not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        return None
    recorded = {i for m in data["messages"] for i in tool_result_ids(m)}
    dropped = [i for i in window.kept if i not in recorded]
    if dropped:
        return Finding("KEPT", f"the result of {dropped[0]} came back before the loop moved on (started another "
                       "tool or called the model), but the file does not hold it",
                       "resume sees that call as unfinished and runs it again, so a finished result is lost "
                       "and its work is done twice")
    return None


def explore_parallel(run: Callable, scenario: Scenario, *, models: Iterable[str] = ("M1", "M2"),
                     directory: str = "checkpoints", timeout: Optional[float] = 20,
                     workdir: Optional[str] = None, max_violations: int = 200, rerun: bool = False) -> Exploration:
    """:func:`~grader.engine.explore.explore_loop` under the level-5 rules (one run, every crash state)."""
    started = time.perf_counter()
    with recorded_run(run, scenario, models, directory=directory, timeout=timeout,
                      workdir=workdir) as (result, recorder, directory):
        try:  # what a finished run left, for the message about the state it returned
            with open(os.path.join(result.workdir, directory, CHECKPOINT_NAME), "rb") as left:
                result.final_file = left.read()
        except OSError:
            pass
        if result.error is None:
            ckpt_dir = result.folder
            windows = parallel_windows(recorder.ops, scenario.task)
            check_trace(result, recorder, ckpt_dir, scenario, max_violations, windows=lambda ops, task: windows,
                        checker=check_parallel, same=same_state)
            kept = Exploration(scenario.name, result.models)
            check_trace(kept, recorder, ckpt_dir, scenario, max_violations, windows=lambda ops, task: windows,
                        checker=check_kept)
            shown = {(v.model, v.point, v.operation) for v in result.violations if v.invariant == "KEPT"}
            result.violations += [v for v in kept.violations
                                  if v.invariant == "KEPT" and (v.model, v.point, v.operation) not in shown]
            if rerun and not result.violations:
                def check(again: Exploration, rec: Any, folder: str, skip: Callable) -> None:
                    again_windows = parallel_windows(rec.ops, scenario.task)
                    check_trace(again, rec, folder, scenario, max_violations, windows=lambda ops, task: again_windows,
                                checker=check_parallel, same=same_state, skip=skip)
                    if not again.violations:
                        check_trace(again, rec, folder, scenario, max_violations,
                                    windows=lambda ops, task: again_windows, checker=check_kept, same=same_state,
                                    skip=skip)
                rerun_after_crashes(result, recorder, run, scenario, ckpt_dir, directory, check, timeout=timeout,
                                    windows=windows)
            for index, name in calls_run_twice(result.ops)[:1]:
                result.violations.insert(0, Violation(
                    "ONCE", "none", index, "with no crash at all", f"when `{name}` started again", {},
                    f"the loop ran `{name}` with the same input a second time, though the model named that call once",
                    "nothing: the damage is done before any crash (a table posted twice)"))
    result.seconds = time.perf_counter() - started
    return result


api.register_kind("parallel", parallel_conversations)


# -- the level plug-in ---------------------------------------------------------------------------------

class ParallelLevel(LevelModule):
    """Level 5: the loop crashed at every point of a run whose turns name several tool calls."""

    namespace = "loop"
    several_calls = True

    def column(self, title: str, folder: Path, level: api.Level, seed: int = 0) -> Optional[api.Column]:
        fn, failed = self.import_function(title, folder, level)
        if failed is not None:
            return failed
        scenario = parallel_tickets(seed)
        # The level's tests' own folder, so the matrix counts the crash states they count.
        exploration = explore_parallel(fn, scenario, models=tuple(level.crash_models) or ("M1", "M2"),
                                       directory=NESTED_FOLDER, timeout=loop_timeout())
        return api.column(title, exploration, scenario.task, parallel_windows)


LEVEL = ParallelLevel()
