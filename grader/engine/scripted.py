"""A scripted model and scripted tools: the course's task, played the same way every time.

``call_model(*, tools, messages)`` returns Messages-API-shaped dicts from a script and checks what
it is sent the way the real API would (a tool_use with no tool_result right after it is a 400
there, so it is an error here too). ``execute_tool(name, input)`` returns the scripted result of the
call the model asked for. No network, no key: same seed, same run.
"""

from __future__ import annotations

import functools
import itertools
import json
import random
from dataclasses import dataclass, field
from typing import Any, Optional

from grader.engine.checkpoint import clone, tool_result_ids, tool_use_blocks

# The seed every face uses when none is given: same seed, same scripted model, same crash states.
DEFAULT_SEED = 20261129
# How many generated conversations a property test tries when none is given.
DEFAULT_EXAMPLES = 12

TICKET_TASK = "Sort last quarter's support tickets by issue type and put the counts in one table"

TICKET_TOOLS = [
    {"name": "list_tickets", "description": "List the support tickets opened in a quarter.",
     "input_schema": {"type": "object", "properties": {"quarter": {"type": "string"}}, "required": ["quarter"]}},
    {"name": "classify_tickets", "description": "Label each ticket with an issue type.",
     "input_schema": {"type": "object", "properties": {"ticket_ids": {"type": "array", "items": {"type": "string"}}},
                      "required": ["ticket_ids"]}},
    {"name": "publish_table", "description": "Post a Markdown table to the team channel (not idempotent).",
     "input_schema": {"type": "object", "properties": {"title": {"type": "string"}, "markdown": {"type": "string"}},
                      "required": ["title", "markdown"]}},
]

NON_IDEMPOTENT_TOOLS = frozenset({"publish_table"})


class ScriptedModelError(AssertionError):
    """The loop sent the scripted model something the real Messages API would refuse, or called it too often."""


class ScriptedToolError(AssertionError):
    """The loop ran a tool the model did not ask for, or ran one call twice."""


@dataclass
class Scenario:
    """One conversation: the task, the tools, each model response and each tool's result, in order."""

    name: str
    task: str
    tools: list
    responses: list
    results: list
    seed: int = 0
    non_idempotent: frozenset = field(default_factory=frozenset)

    @property
    def turns(self) -> int:
        return len(self.results)

    def model(self) -> "ScriptedModel":
        return ScriptedModel(self)

    def executor(self) -> "ScriptedTools":
        return ScriptedTools(self)


def check_messages(messages: Any) -> None:
    """Raise ScriptedModelError where the real API would answer 400 to these messages."""
    assistant_turns(messages)


_ROLES = frozenset(("user", "assistant"))


def _roles(messages: list, start: int = 0) -> list:
    """Each message's role, read without a Python loop when every message is a plain dict whose role
    is "user" or "assistant" (a model is sent the whole history at every call). ``messages`` begins
    at ``messages[start]`` of the history, which is how an error names it."""
    if set(map(type, messages)) == {dict}:
        roles = list(map(dict.get, messages, itertools.repeat("role")))
        try:
            if set(roles) <= _ROLES:
                return roles
        except TypeError:  # a role that cannot be hashed: the loop below says which message
            pass
    for i, message in enumerate(messages, start):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            role = message.get("role") if isinstance(message, dict) else None
            tail = (": tool results go in a user message, the one right after the assistant's tool calls"
                    if role == "tool" else "")
            raise ScriptedModelError(f"messages[{i}] is not a user or assistant message: {str(message)[:80]} "
                                     f"(the API knows only those two roles{tail})")
    return [message["role"] for message in messages]


def assistant_turns(messages: Any, start: int = 0, before: Optional[list] = None) -> list:
    """:func:`check_messages`, returning where the assistant's messages are (how many there are is
    the number of the response a model sends next).

    ``start`` and ``before``: the first ``start`` messages were checked already, and ``before`` is
    where their assistant messages are. Only the rest is checked, from the last of those on (its
    pairing looks at the message after it), and the errors are the ones a whole check would give.
    """
    if not isinstance(messages, list) or not messages:
        raise ScriptedModelError("messages must be a non-empty list")
    tail = messages[start:] if start else messages
    assistant = list(itertools.compress(itertools.count(start), map("assistant".__eq__, _roles(tail, start))))
    if messages[0]["role"] != "user":
        raise ScriptedModelError("the first message must be the user's")
    checked = [before[-1]] if before and before[-1] == start - 1 else []
    for i in checked + assistant:
        content = messages[i].get("content")
        if not isinstance(content, list):
            continue
        wanted = [b["id"] for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
        if not wanted:
            continue
        following = messages[i + 1] if i + 1 < len(messages) else None
        answered = tool_result_ids(following) if following and following.get("role") == "user" else []
        missing = [w for w in wanted if w not in answered]
        if missing:
            raise ScriptedModelError(
                f"messages[{i}] has tool_use {', '.join(missing)} with no tool_result in the message right after it "
                "(the real API answers this with a 400)" + (_split_results(messages, i, wanted, missing)
                                                             or _what_follows(following, i + 1, wanted)))
        if len(answered) != len(set(answered)):
            raise ScriptedModelError(f"messages[{i + 1}] answers one tool_use twice")
        blocks = following.get("content")
        kinds = [isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks]
        if False in kinds[:len(answered)]:
            # The API wants the answers to tool calls first; text may only follow them.
            raise ScriptedModelError(
                f"messages[{i + 1}] answers the tool calls of messages[{i}], but its content has "
                f"{_kind(blocks[kinds.index(False)])} block before a tool_result block: the API wants every "
                "tool_result first in that message, and anything else after them (it answers 400)")
    _orphan_results(messages, start, assistant + ([before[-1]] if before else []))
    return (before or []) + assistant if start else assistant


def _orphan_results(messages: list, first: int, assistant: list) -> None:
    """A tool_result must answer a tool_use of the assistant message right before it: one for a call the
    transcript never made (its tool_use left out of the file, an id copied wrong) is a 400 from the real API.
    ``first``: where the messages not checked yet begin; ``assistant``: where the assistant messages
    from the one before ``first`` on are."""
    asked = {i + 1 for i in assistant}
    for i in range(first, len(messages)):
        answered = tool_result_ids(messages[i])
        if not answered:
            continue
        calls = messages[i - 1].get("content") if i in asked else None
        ids = {b.get("id") for b in calls if isinstance(b, dict) and b.get("type") == "tool_use"} \
            if isinstance(calls, list) else set()
        stray = [a for a in answered if a not in ids]
        if stray:
            # A result repeated in a later message answers a call the transcript did make: that is a result
            # recorded twice (the ONCE invariant's story), not a call that was never made.
            asked_before = {b.get("id") for m in messages[:i] if isinstance(m, dict) and m.get("role") == "assistant"
                            for b in tool_use_blocks(m.get("content"))}
            stray = [a for a in stray if a not in asked_before]
        if stray:
            what = (f"the assistant message before it (messages[{i - 1}]) asked for "
                    f"{', '.join(sorted(map(str, ids))) or 'no tool'}" if i in asked else
                    "no message comes before it" if i == 0 else
                    f"the message before it (messages[{i - 1}]) is not the assistant's")
            raise ScriptedModelError(
                f"messages[{i}] holds a tool_result for {', '.join(map(str, stray))}, but {what}: a tool_result "
                "answers a tool_use of the assistant message right before it (the real API answers this with a 400)")


def _kind(block: Any) -> str:
    """A content block's type in words: "a text", "a str"."""
    kind = block.get("type") if isinstance(block, dict) else type(block).__name__
    return f"{'an' if str(kind)[:1] in 'aeiou' else 'a'} {str(kind)[:20]}"


def _what_follows(following: Any, j: int, wanted: list) -> str:
    """What the message after a tool_use holds instead of its tool_result, where that tells the mistake:
    nothing (the model called before the call was answered), results under other ids, results sent in
    the assistant's own name, or a user message that speaks of the call without answering it."""
    if following is None:
        return (": the transcript ends with that tool_use, so the model was called again before the call was "
                "answered. Its tool_result must come first")
    if not isinstance(following, dict):
        return ""
    others = tool_result_ids(following)
    if following.get("role") == "assistant" and others:
        return (f": messages[{j}] holds the tool_result, but as the assistant's message. A tool's result goes back "
                "to the model in a user message, right after the assistant's tool_use")
    if following.get("role") == "user" and others:
        if set(others) <= set(wanted):
            return (f": messages[{j}] holds the result of {', '.join(map(str, others))} only. Every call that message "
                    "asked for needs its tool_result there, each one kept once it is recorded")
        return (f": messages[{j}] holds a tool_result for {', '.join(str(o) for o in others if o not in wanted)} "
                "instead. A tool_result's tool_use_id must be the id the model gave that tool_use block")
    content = following.get("content")
    if following.get("role") == "user" and isinstance(content, str):
        return (f": messages[{j}] holds plain text, not a tool_result. A tool's output goes back in a tool_result "
                "block that carries the call's id")
    if following.get("role") == "user" and isinstance(content, list) and content:
        return (f": messages[{j}] holds {_kind(content[0])} block, not a tool_result. Only a tool_result block "
                "with the call's id answers a call (an error result, with is_error, says it failed)")
    return ""


def _split_results(messages: list, i: int, wanted: list, missing: list) -> str:
    """Why the results are missing, when they are there but in later user messages: the turn's results
    were split across several messages ("" when that is not what happened)."""
    later: list = []
    j = i + 1
    while j < len(messages) and messages[j].get("role") == "user":
        later.append(j)
        j += 1
    found = [k for k in later[1:] if set(tool_result_ids(messages[k])) & set(missing)]
    if not found:
        return ""
    spread = [k for k in later if set(tool_result_ids(messages[k])) & set(wanted)]
    return (f": the results are there, but split across {len(spread)} user messages (messages[{spread[0]}] to "
            f"messages[{spread[-1]}]). The API wants every tool_result of one assistant turn in the single user "
            f"message right after it: one message holding {len(wanted)} tool_result blocks")


class CheckedHistory:
    """:func:`assistant_turns` for one model across a run, checking only what is new at each call.

    A loop sends its whole history at every call, so checking all of it each time is quadratic in
    the turns. This keeps a deep copy of what it last checked: when the messages sent begin with
    exactly that (``==``, so an earlier message edited in place is noticed), only the messages after
    it are checked; otherwise everything is, as the first time.
    """

    def __init__(self) -> None:
        self._copy: list = []
        self._assistant: list = []

    def __call__(self, messages: Any) -> list:
        k = len(self._copy)
        try:
            same = 0 < k <= len(messages) and messages[:k] == self._copy
        except Exception:  # noqa: BLE001 - not a list, or a value whose == raises: check it all
            same = False
        if not same:
            self._copy, self._assistant, k = [], [], 0
        assistant = assistant_turns(messages, k, self._assistant) if k else assistant_turns(messages)
        try:
            try:
                self._copy.extend(_containers_copied(messages[k:]))
            except (_NotPlain, RecursionError):
                self._copy.extend(clone(messages[k:]))
        except Exception:  # noqa: BLE001 - nothing to compare with next time: that call checks everything
            self._copy = []
        self._assistant = assistant if self._copy else []
        return assistant


class _NotPlain(Exception):
    pass


_ATOMS = frozenset((str, int, float, bool, type(None)))


def _containers_copied(value: Any) -> Any:
    """A deep copy of JSON-like data that shares its strings and numbers with the original.

    Those cannot change, and ``==`` between two lists that share them stops at each shared one
    instead of comparing it character by character: about half the cost, at every model call.
    Anything other than dicts with string keys, lists and those atoms raises _NotPlain.
    """
    kind = type(value)
    if kind is list:
        return [_containers_copied(v) for v in value]
    if kind is dict:
        if not all(type(k) is str for k in value):
            raise _NotPlain
        return {k: _containers_copied(v) for k, v in value.items()}
    if kind in _ATOMS:
        return value
    raise _NotPlain


class ScriptedModel:
    """``call_model(*, tools, messages)`` for a :class:`Scenario`.

    Stateless on purpose: the answer depends only on the messages sent (the number of assistant
    turns in them), like a real model, so a loop resumed from a checkpoint gets the same script.
    """

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self.calls = 0
        self.checked = CheckedHistory()

    def __call__(self, *, tools: Any = None, messages: Any = None, **_: Any) -> dict:
        return self.respond(messages, len(self.checked(messages)))

    def respond(self, messages: list, index: int) -> dict:
        """The answer to ``messages``, already checked, which hold ``index`` assistant turns."""
        if messages[-1]["role"] != "user":
            raise ScriptedModelError("the last message sent to the model must be the user's (a task or tool results)")
        if index >= len(self.scenario.responses):
            raise ScriptedModelError(
                f"the model was called again after its final answer (the conversation already has {index} "
                "assistant turns and the last one ended with stop_reason 'end_turn')")
        self.calls += 1
        return clone(self.scenario.responses[index])


class ScriptedTools:
    """``execute_tool(name, input)`` for a :class:`Scenario`; keeps a log of every effect.

    The call is matched to the tool_use block the model asked for with the same name and input
    (the first one not yet run, or the last one if all have run), so a resumed loop can run a
    tool again and the log shows it: ``effects`` lists ``(tool_use id, name, input)`` per run.
    """

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self.calls = 0
        self.effects: list[tuple[str, str, Any]] = []
        self.blocks = [b for r in scenario.responses for b in tool_use_blocks(r.get("content"))]
        self._done: tuple = (None, 0, set())  # (the effects list, how many of it were read, their ids)
        # Where each tool name's blocks are: a long task has hundreds of calls to one or two tools.
        self._by_name: dict = {}
        for i, b in enumerate(self.blocks):
            self._by_name.setdefault(b["name"], []).append(i)

    def __call__(self, name: str, tool_input: Any, **_: Any) -> str:
        normal = json.loads(json.dumps(tool_input))
        done = self._done_ids()
        try:
            candidates = self._by_name.get(name, ())
        except TypeError:  # a name that cannot be hashed names no tool the model asked for
            candidates = ()
        matches = [i for i in candidates if self.blocks[i]["input"] == normal]
        if not matches:
            raise ScriptedToolError(
                f"the loop ran {name}({json.dumps(tool_input)[:80]}), but the model never asked for that call")
        fresh = [i for i in matches if self.blocks[i]["id"] not in done]
        index = fresh[0] if fresh else matches[-1]
        block = self.blocks[index]
        self.effects.append((block["id"], name, tool_input))
        self.calls += 1
        return self.scenario.results[index]

    def _done_ids(self) -> set:
        """The ids in ``effects``, read on from where the last call stopped (a subclass may start
        the log with earlier calls, or append to it itself)."""
        effects, read, ids = self._done
        if effects is not self.effects or read > len(self.effects):
            effects, read, ids = self.effects, 0, set()
        ids.update(effect[0] for effect in effects[read:])
        self._done = (effects, len(effects), ids)
        return ids

    def runs_of(self, tool_use_id: str) -> int:
        """How many times the call the model made under ``tool_use_id`` was run."""
        return sum(1 for effect in self.effects if effect[0] == tool_use_id)


def random_tool_id(rng: random.Random) -> str:
    alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789"
    return "toolu_01" + "".join(rng.choice(alphabet) for _ in range(22))


def random_usage(rng: random.Random, history: int, cached: bool) -> dict:
    usage = {"input_tokens": history + rng.randint(40, 90), "output_tokens": rng.randint(30, 400)}
    if cached:
        usage["cache_creation_input_tokens"] = rng.randint(0, 200)
        usage["cache_read_input_tokens"] = rng.randint(200, 1800)
    return usage


ISSUE_TYPES = ["billing", "login", "bug", "feature request", "shipping", "refund"]


@functools.lru_cache(maxsize=16)  # one per seed: every judge of a batch inherits the one built before forking
def support_tickets(seed: int = 0, tickets: int = 240) -> Scenario:
    """The course's task: sort last quarter's support tickets by issue type into one table.

    Three tool calls (list, classify, publish), then a final answer. The ticket list is large
    enough (tens of KiB) that one checkpoint takes several buffer flushes to write.
    """
    rng = random.Random(seed)
    subjects = ["Charged twice", "Can't sign in", "Export crashes", "Dark mode please", "Parcel late",
                "Refund not received", "Password reset loop", "Invoice shows wrong VAT", "Café menu garbled: ☕"]
    rows = [{"id": f"T-{4000 + i}", "subject": rng.choice(subjects), "opened": f"2026-0{rng.randint(7, 9)}-{rng.randint(10, 28)}",
             "body": " ".join(rng.choice(["app", "order", "card", "account", "screen", "error", "again", "today", "ünïcode"])
                              for _ in range(rng.randint(8, 20)))} for i in range(tickets)]
    labels = {row["id"]: rng.choice(ISSUE_TYPES) for row in rows}
    counts = {t: sum(1 for v in labels.values() if v == t) for t in ISSUE_TYPES}
    table = "| issue type | tickets |\n|---|---|\n" + "".join(f"| {t} | {n} |\n" for t, n in sorted(counts.items()))
    calls = [
        ("I'll start by listing last quarter's tickets.", "list_tickets", {"quarter": "2026-Q3"}, json.dumps(rows, ensure_ascii=False)),
        (f"There are {tickets} tickets. Next I'll label each with an issue type.", "classify_tickets",
         {"ticket_ids": [r["id"] for r in rows]}, json.dumps(labels)),
        ("Here is the table; I'll publish it.", "publish_table", {"title": "Q3 tickets by issue type", "markdown": table},
         json.dumps({"posted": True, "message_id": "msg_" + str(rng.randint(10 ** 5, 10 ** 6))})),
    ]
    responses, results, history = [], [], len(TICKET_TASK) // 4
    for i, (text, name, tool_input, result) in enumerate(calls):
        responses.append({"id": f"msg_{i:02d}", "type": "message", "role": "assistant", "stop_reason": "tool_use",
                          "content": [{"type": "text", "text": text},
                                      {"type": "tool_use", "id": random_tool_id(rng), "name": name, "input": tool_input}],
                          "usage": random_usage(rng, history, cached=i > 0)})
        results.append(result)
        history += len(result) // 4
    responses.append({"id": "msg_end", "type": "message", "role": "assistant", "stop_reason": "end_turn",
                      "content": [{"type": "text", "text": "Done. Q3 tickets by issue type:\n\n" + table}],
                      "usage": random_usage(rng, history, cached=True)})
    return Scenario("support-tickets", TICKET_TASK, TICKET_TOOLS, responses, results, seed, NON_IDEMPOTENT_TOOLS)


def from_turns(task: str, turns: list[tuple[str, Any, str]], final_text: str = "Done.", *, seed: int = 0,
               usages: list[dict] | None = None, name: str = "conversation") -> Scenario:
    """Build a scenario from ``(tool name, tool input, result)`` triples, one tool call per turn."""
    rng = random.Random(seed)
    names = sorted({t[0] for t in turns}) or ["noop"]
    tools = [{"name": n, "description": f"scripted tool {n}", "input_schema": {"type": "object"}} for n in names]
    responses, results = [], []
    for i, (tool, tool_input, result) in enumerate(turns):
        usage = usages[i] if usages else random_usage(rng, 100 * i, cached=i % 2 == 1)
        responses.append({"id": f"msg_{i}", "type": "message", "role": "assistant", "stop_reason": "tool_use",
                          "content": [{"type": "tool_use", "id": random_tool_id(rng), "name": tool, "input": tool_input}],
                          "usage": usage})
        results.append(result)
    usage = usages[len(turns)] if usages else random_usage(rng, 100 * len(turns), cached=False)
    responses.append({"id": "msg_end", "type": "message", "role": "assistant", "stop_reason": "end_turn",
                      "content": [{"type": "text", "text": final_text}], "usage": usage})
    return Scenario(name, task, tools, responses, results, seed)
