"""VERDICT: fail ATOMIC-DIR

Reasoning first. The temp file is written one level up, in the folder that holds `directory`, "so
that the checkpoint folder only ever holds checkpoint.json". Often the parent is the same file
system and the rename is one step, but nothing promises that: `directory` may be a mount point of its
own (a volume, a tmpfs), and then os.replace fails with EXDEV, or a move turns into a copy a kill
can tear. It also shares one temp name among every checkpoint folder under that parent, so two runs
side by side write over each other's temp file. The README asks for the temp file beside
checkpoint.json; the crash guarantees otherwise hold (save points and counters are right).
"""

import json
import os


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    parent = os.path.dirname(os.path.abspath(directory))
    temp = os.path.join(parent, ".checkpoint.json.tmp")
    with open(temp, "w", encoding="utf-8") as f:
        json.dump(state, f)
    os.replace(temp, os.path.join(directory, "checkpoint.json"))


def spend(response):
    usage = response.get("usage") or {}
    return sum(usage.get(k) or 0 for k in ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                                            "cache_read_input_tokens"))


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    state = {"version": 1, "task": task, "turns": 0, "tokensUsed": 0,
             "messages": [{"role": "user", "content": task}], "pendingToolUse": None}
    response = call_model(tools=tools, messages=state["messages"])
    state["tokensUsed"] += spend(response)
    while response["stop_reason"] == "tool_use":
        state["messages"].append({"role": "assistant", "content": response["content"]})
        use = next(b for b in response["content"] if b["type"] == "tool_use")
        state["pendingToolUse"] = {"id": use["id"], "name": use["name"], "input": use["input"]}
        save_checkpoint(state, directory)
        result = execute_tool(use["name"], use["input"])
        state["messages"].append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": use["id"], "content": result}]})
        state["turns"] += 1
        state["pendingToolUse"] = None
        save_checkpoint(state, directory)
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)
    state["messages"].append({"role": "assistant", "content": response["content"]})
    save_checkpoint(state, directory)
    return state
