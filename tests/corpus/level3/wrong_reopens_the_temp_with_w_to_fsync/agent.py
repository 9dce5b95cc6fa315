"""Wrong everywhere. Reasoning first: the learner closes the temp file, then "opens it again to get a
descriptor for fsync" with open(temp, "w"). Mode "w" truncates: the fsync makes an empty file
durable, and the rename puts that empty file under the checkpoint's name. Every save leaves
checkpoint.json empty, with or without a crash, so the first check (a killed process leaves a whole,
current file) already fails, and so does every power-cut model and the generated conversations.
"""

import json
import os
import warnings


def _sync_folder(folder):
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        warnings.warn(f"cannot fsync the folder {folder}", RuntimeWarning)
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(state, directory="checkpoints"):
    if not os.path.isdir(directory):
        os.makedirs(directory)
        _sync_folder(os.path.dirname(os.path.abspath(directory)))
    path = os.path.join(directory, "checkpoint.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(state, f)
    with open(path + ".tmp", "w") as again:  # a descriptor to fsync
        os.fsync(again.fileno())
    os.replace(path + ".tmp", path)
    _sync_folder(directory)


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
