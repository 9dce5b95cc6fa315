"""VERDICT: fail ERROR

pathlib all the way: the temp path is Path(tempfile.gettempdir()) / "checkpoint.json.tmp", written
with write_text and put in place with Path.replace. /tmp is another file system, so the replace
fails with EXDEV and the loop stops at its first save.
"""
import json
import tempfile
from pathlib import Path


def save_checkpoint(state, directory="checkpoints"):
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.gettempdir()) / "checkpoint.json.tmp"
    tmp.write_text(json.dumps(state), encoding="utf-8")
    tmp.replace(folder / "checkpoint.json")


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
