"""VERDICT: pass

A generator yields each tool call the model names; the loop saves around each one, and the saves
write bytes through tempfile.NamedTemporaryFile(delete=False) in the checkpoint folder.
"""

import json
import os
import tempfile


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    with tempfile.NamedTemporaryFile("wb", dir=directory, prefix=".ckpt-", suffix=".tmp", delete=False) as f:
        f.write(json.dumps(state).encode("utf-8"))
        name = f.name
    os.replace(name, os.path.join(directory, "checkpoint.json"))


def spend(response):
    usage = response.get("usage") or {}
    return sum(usage.get(k) or 0 for k in ("input_tokens", "output_tokens",
                                            "cache_creation_input_tokens", "cache_read_input_tokens"))


def _calls(state, tools, call_model):
    """Yield each tool_use block the model asks for; the final answer ends the generator."""
    while True:
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)
        state["messages"].append({"role": "assistant", "content": response["content"]})
        if response["stop_reason"] != "tool_use":
            return
        yield next(b for b in response["content"] if b["type"] == "tool_use")


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    state = {"version": 1, "task": task, "turns": 0, "tokensUsed": 0,
             "messages": [{"role": "user", "content": task}], "pendingToolUse": None}
    for block in _calls(state, tools, call_model):
        state["pendingToolUse"] = {"id": block["id"], "name": block["name"], "input": block["input"]}
        save_checkpoint(state, directory)
        result = execute_tool(block["name"], block["input"])
        state["messages"].append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": block["id"], "content": result}]})
        state["turns"] += 1
        state["pendingToolUse"] = None
        save_checkpoint(state, directory)
    save_checkpoint(state, directory)
    return state
