"""Wrong when fsync fails. Reasoning first: the save writes, flushes and fsyncs the temp file, but the
rename sits in a `finally` ("the checkpoint must always be updated"). When fsync raises EIO the
exception does reach the caller, but only after the rename has put the temp file, whose data the
disk just said it could not store, under the checkpoint's name: the previous save, which was
durable, is gone. Without a fault every power-cut model holds.
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
    directory = os.path.abspath(directory)
    if not os.path.isdir(directory):
        parent = os.path.dirname(directory)
        if not os.path.isdir(parent):
            save_parent = os.path.dirname(parent)
            os.makedirs(parent)
            _sync_folder(save_parent)
        os.mkdir(directory)
        _sync_folder(parent)
    path = os.path.join(directory, "checkpoint.json")
    f = open(path + ".tmp", "w", encoding="utf-8")
    try:
        json.dump(state, f)
        f.flush()
        os.fsync(f.fileno())
    finally:
        f.close()
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
