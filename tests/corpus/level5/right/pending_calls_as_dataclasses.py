"""Right: the calls of a turn are kept as dataclass objects and turned into the protocol's dicts with
dataclasses.asdict at each save.

Reasoning first. Save point A writes every call of the turn (asdict gives exactly id, name and input)
before any runs; each result is appended to the one results message that follows the assistant
message (created with the first result), `turns` goes up by one per result, the answered call leaves
the list, and the state is saved (B) before the next call starts; after the last one the list is
empty, written as null. The save is level 2's: a temp file beside the checkpoint, closed, then
os.replace. Every crash state is one whole save, and every started call is pending or answered.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    input: Any


def save_checkpoint(state: dict, directory: str = "checkpoints") -> None:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(state, f)
    os.replace(path + ".tmp", path)


def _spend(response: dict) -> int:
    usage = response.get("usage") or {}
    return sum(usage.get(k) or 0 for k in ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                                            "cache_read_input_tokens"))


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    state: dict[str, Any] = {"version": 1, "task": task, "turns": 0, "tokensUsed": 0,
                             "messages": [{"role": "user", "content": task}], "pendingToolUse": None}
    waiting: list[Call] = []

    def save() -> None:
        state["pendingToolUse"] = [asdict(c) for c in waiting] or None
        save_checkpoint(state, directory)

    response = call_model(tools=tools, messages=state["messages"])
    state["tokensUsed"] += _spend(response)
    while response["stop_reason"] == "tool_use":
        state["messages"].append({"role": "assistant", "content": response["content"]})
        waiting = [Call(b["id"], b["name"], b["input"]) for b in response["content"] if b["type"] == "tool_use"]
        save()  # save point A: the whole turn
        results: Optional[dict] = None
        for call in list(waiting):
            output = execute_tool(call.name, call.input)
            if results is None:
                results = {"role": "user", "content": []}
                state["messages"].append(results)
            results["content"].append({"type": "tool_result", "tool_use_id": call.id, "content": output})
            state["turns"] += 1
            waiting.remove(call)
            save()  # save point B for this result
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += _spend(response)
    state["messages"].append({"role": "assistant", "content": response["content"]})
    save()
    return state
