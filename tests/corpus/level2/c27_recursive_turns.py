"""VERDICT: pass

Each turn is one call of a recursive helper; saves go through a temp file beside the checkpoint.
"""

import json
import os
import sys


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    with open(path + ".new", "w", encoding="utf-8") as f:
        json.dump(state, f)
    os.replace(path + ".new", path)


def spend(response):
    usage = response.get("usage") or {}
    return sum(usage.get(k) or 0 for k in ("input_tokens", "output_tokens",
                                            "cache_creation_input_tokens", "cache_read_input_tokens"))


def _turn(state, response, tools, call_model, execute_tool, directory):
    state["messages"].append({"role": "assistant", "content": response["content"]})
    if response["stop_reason"] != "tool_use":
        save_checkpoint(state, directory)
        return state
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
    return _turn(state, response, tools, call_model, execute_tool, directory)


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 5000))
    state = {"version": 1, "task": task, "turns": 0, "tokensUsed": 0,
             "messages": [{"role": "user", "content": task}], "pendingToolUse": None}
    response = call_model(tools=tools, messages=state["messages"])
    state["tokensUsed"] += spend(response)
    return _turn(state, response, tools, call_model, execute_tool, directory)
