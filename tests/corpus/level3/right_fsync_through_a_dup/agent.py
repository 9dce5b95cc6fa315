"""Right: the temp file is fsynced through a duplicate of its descriptor (os.dup), which shares the open
file with the original, and the duplicate is closed after; the folder is fsynced after the rename."""

import json
import os
import warnings


def _sync_folder(folder):
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        warnings.warn(f"cannot open {folder!r} to fsync it here", RuntimeWarning)
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_folder(folder):
    folder = os.path.abspath(folder)
    if os.path.isdir(folder):
        return
    _make_folder(os.path.dirname(folder))
    os.makedirs(folder, exist_ok=True)
    _sync_folder(os.path.dirname(folder))


def save_checkpoint(state, directory="checkpoints"):
    _make_folder(directory)
    path = os.path.join(directory, "checkpoint.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(state, f)
        f.flush()
        twin = os.dup(f.fileno())
    try:
        os.fsync(twin)
    finally:
        os.close(twin)
    os.replace(path + ".tmp", path)
    _sync_folder(directory)


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
