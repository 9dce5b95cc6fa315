"""The checkpoint protocol (DESIGN.md §3): six fields, how spend is counted, and the reference loop.

The reference loop is the loop exactly as the lesson draws it. The invariants compare what a
student's loop left on disk with the states this loop would have saved, so a student's code may be
written any way it likes as long as the file it leaves is one of these.
"""

from __future__ import annotations

import copy
import io
import json
import pickle
from typing import Any, Callable, Iterable, Optional

CHECKPOINT_NAME = "checkpoint.json"
VERSION = 1
FIELDS = ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")
FIELD_TYPES = {
    "version": int,
    "task": str,
    "turns": int,
    "tokensUsed": int,
    "messages": list,
    "pendingToolUse": (dict, type(None)),
}
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def spend(response: dict) -> int:
    """Tokens one model response cost: input, output and both cache counts (absent keys count 0).

    Every call resends the whole history as input, so input tokens are most of what a long task
    spends; counting only output tokens would leave a spend budget blind to them. (This is spend,
    summed over calls; how full the context is, is the last call's input alone.)
    """
    usage = response.get("usage") or {}
    return sum(int(usage.get(key) or 0) for key in USAGE_KEYS)


def tool_use_blocks(content: Any) -> list[dict]:
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]


def tool_result_ids(message: Any) -> list:
    """The ``tool_use_id`` of each tool_result block in ``message`` (none if it is not a message with a list)."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    return [b.get("tool_use_id") for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def pending_record(block: dict) -> dict:
    return {"id": block["id"], "name": block["name"], "input": block["input"]}


def tool_result_message(block: dict, result: str) -> dict:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block["id"], "content": result}]}


def initial_state(task: str) -> dict:
    return {
        "version": VERSION,
        "task": task,
        "turns": 0,
        "tokensUsed": 0,
        "messages": [{"role": "user", "content": task}],
        "pendingToolUse": None,
    }


def snapshot(state: dict) -> dict:
    """What a save of ``state`` puts on disk: the six fields, as JSON would give them back."""
    return json.loads(json.dumps({key: state[key] for key in FIELDS}))


def clone(value: Any) -> Any:
    """A deep copy of plain data (what ``copy.deepcopy`` gives, several times faster for JSON-like values)."""
    try:
        return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # noqa: BLE001 - something pickle cannot carry: the slow, general copy
        return copy.deepcopy(value)


def exactly_saved(state: Any, saved: dict) -> Optional[dict]:
    """``saved`` when ``snapshot(state)`` would give exactly it, found without the JSON round trip
    (None when that cannot be told this way). Exactly: the six fields equal and pickled alike, so
    True is not taken for 1, a tuple for a list, nor one key order for another; ``saved`` came
    through JSON, so only plain JSON values pickle like it."""
    if not isinstance(state, dict) or any(key not in state for key in FIELDS):
        return None
    mine = {key: state[key] for key in FIELDS}
    try:
        if mine != saved or plain_pickle(mine) != plain_pickle(saved):
            return None
    except Exception:  # noqa: BLE001 - a value pickle or == cannot handle: the round trip will say
        return None
    return saved


def plain_pickle(value: Any) -> bytes:
    """``value`` pickled with protocol 2 and no memo: equal plain values give equal bytes, and a
    list's items follow one another (its pickle begins with the pickle of any list its first items
    make, bar the closing opcodes)."""
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=2)
    pickler.fast = True  # no memo: the same bytes however the value's parts are shared
    pickler.dump(value)
    return out.getvalue()


def run_reference(task: str, tools: list, call_model: Callable, execute_tool: Callable,
                  save: Callable[[dict, str], None]) -> dict:
    """The loop of DESIGN.md §3, calling ``save(state, label)`` at each save point.

    ``label`` is ``"A"``, ``"B"`` or ``"final"``. Used to build the states a correct loop saves.
    """
    state = initial_state(task)
    response = call_model(tools=tools, messages=clone(state["messages"]))
    state["tokensUsed"] += spend(response)
    while response.get("stop_reason") == "tool_use":
        state["messages"].append({"role": "assistant", "content": response["content"]})
        block = tool_use_blocks(response["content"])[0]
        state["pendingToolUse"] = pending_record(block)
        save(state, "A")
        result = execute_tool(block["name"], block["input"])
        state["messages"].append(tool_result_message(block, result))
        state["turns"] += 1
        state["pendingToolUse"] = None
        save(state, "B")
        response = call_model(tools=tools, messages=clone(state["messages"]))
        state["tokensUsed"] += spend(response)
    state["messages"].append({"role": "assistant", "content": response["content"]})
    save(state, "final")
    return state


_REFERENCES: dict = {}


def reference_saves(task: str, responses: Iterable[dict], results: Iterable[str]) -> list[tuple[str, dict]]:
    """The ``(label, snapshot)`` pairs a correct loop saves, given the responses and tool results.

    Remembered per conversation (compared by value), because every crash test of the same
    scenario asks again, and ``crashcourse grade`` asks once per submission. Callers must not
    change the snapshots they get back.
    """
    responses = list(responses)
    results = list(results)
    known = _REFERENCES.setdefault((task, len(responses), len(results)), [])
    for seen_responses, seen_results, saves in known:
        if seen_responses == responses and seen_results == results:
            return list(saves)
    if sum(len(v) for v in _REFERENCES.values()) > 512:
        _REFERENCES.clear()
        known = _REFERENCES.setdefault((task, len(responses), len(results)), [])
    saves = compute_reference_saves(task, list(responses), list(results))
    known.append((copy.deepcopy(responses), results, saves))
    return list(saves)


def compute_reference_saves(task: str, responses: list, results: list) -> list[tuple[str, dict]]:
    """The saves of :func:`run_reference` on this conversation, built in linear time.

    The saves share their message objects (a loop only ever appends messages), so a long run costs
    no more than its history; each piece goes through JSON once, which gives what a round trip of
    each whole save would. Where the trace stops early (a loop that returned before the model's
    final answer, or before a tool's result came back), the saves stop at the same place.
    """
    task, responses, results = json.loads(json.dumps([task, responses, results]))
    messages: list = [{"role": "user", "content": task}]
    turns, tokens, pending = 0, 0, None
    saves: list[tuple[str, dict]] = []

    def save(label: str) -> None:
        saves.append((label, {"version": VERSION, "task": task, "turns": turns, "tokensUsed": tokens,
                              "messages": list(messages), "pendingToolUse": pending}))

    if not responses:
        return saves
    response = responses.pop(0)
    tokens += spend(response)
    while response.get("stop_reason") == "tool_use":
        messages.append({"role": "assistant", "content": response["content"]})
        block = tool_use_blocks(response["content"])[0]
        pending = pending_record(block)
        save("A")
        if not results:
            return saves
        messages.append(tool_result_message(block, results.pop(0)))
        turns += 1
        pending = None
        save("B")
        if not responses:
            return saves
        response = responses.pop(0)
        tokens += spend(response)
    messages.append({"role": "assistant", "content": response["content"]})
    save("final")
    return saves


def field_problems(data: Any, pending_problem: Optional[Callable[[Any], Optional[str]]] = None) -> list[str]:
    """Why ``data`` (a parsed checkpoint) does not have exactly the six fields with the right types.

    ``pending_problem(value)`` replaces the check of ``pendingToolUse`` where a level gives it
    another shape (level 5: a list of calls); it returns what is wrong, or None.
    """
    if not isinstance(data, dict):
        return [f"the file holds a JSON {type(data).__name__}, not an object with the six fields"]
    problems = []
    missing = [k for k in FIELDS if k not in data]
    extra = [k for k in data if k not in FIELDS]
    if missing:
        problems.append("missing " + ", ".join(f"`{k}`" for k in missing))
    if extra:
        problems.append("extra keys that are not part of the protocol: " + ", ".join(f"`{k}`" for k in extra))
    for key, kind in FIELD_TYPES.items():
        if key not in data:
            continue
        if key == "pendingToolUse" and pending_problem is not None:
            problem = pending_problem(data[key])
            if problem:
                problems.append(problem)
        elif not isinstance(data[key], kind) or isinstance(data[key], bool):
            want = "null or an object" if key == "pendingToolUse" else kind.__name__
            problems.append(f"`{key}` is {json.dumps(data[key])[:40]}, not {want}")
    if isinstance(data.get("version"), int) and data["version"] != VERSION and not isinstance(data["version"], bool):
        problems.append(f"`version` is {data['version']}, not {VERSION}")
    return problems


def read_or_none(path: str) -> Optional[bytes]:
    """The bytes of the file at ``path``, or None if there is none to read."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None
