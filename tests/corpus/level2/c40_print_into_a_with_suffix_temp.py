"""VERDICT: pass

The temp file's name comes from Path.with_suffix (checkpoint.part, beside checkpoint.json); the JSON
is written with print(..., file=f), so the file ends in a newline; Path.rename puts it in place.
"""

import json
from pathlib import Path


def save_checkpoint(state, directory="checkpoints"):
    target = Path(directory, "checkpoint.json")
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_suffix(".part")
    with part.open("w", encoding="utf-8") as f:
        print(json.dumps(state, indent="\t", ensure_ascii=False), file=f)
    part.rename(target)


def spend(response):
    usage = response.get("usage") or {}
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(usage.get(key) or 0 for key in keys)


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    state = {"version": 1, "task": task, "turns": 0, "tokensUsed": 0,
             "messages": [{"role": "user", "content": task}], "pendingToolUse": None}
    response = call_model(tools=tools, messages=state["messages"])
    state["tokensUsed"] += spend(response)
    while response["stop_reason"] == "tool_use":
        state["messages"].append({"role": "assistant", "content": response["content"]})
        block = next(b for b in response["content"] if b["type"] == "tool_use")
        state["pendingToolUse"] = {"id": block["id"], "name": block["name"], "input": block["input"]}
        save_checkpoint(state, directory)
        result = execute_tool(block["name"], block["input"])
        state["messages"].append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": block["id"], "content": result}]})
        state["turns"] += 1
        state["pendingToolUse"] = None
        save_checkpoint(state, directory)
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)
    state["messages"].append({"role": "assistant", "content": response["content"]})
    save_checkpoint(state, directory)
    return state
