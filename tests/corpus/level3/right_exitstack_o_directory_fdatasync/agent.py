"""Right: every descriptor is closed by one contextlib.ExitStack; the temp file is written with
os.write and made durable with os.fdatasync, the folder is opened with O_DIRECTORY and fsynced
after the rename (falling back, with a warning, where a folder cannot be opened); new folders are
made one level at a time, each parent fsynced."""

import contextlib
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
    data = json.dumps(state).encode("utf-8")
    with contextlib.ExitStack() as stack:
        fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        stack.callback(os.close, fd)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fdatasync(fd)
    os.replace(path + ".tmp", path)
    try:
        dfd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        warnings.warn("cannot open the checkpoint folder to fsync it", RuntimeWarning)
        return
    with contextlib.ExitStack() as stack:
        stack.callback(os.close, dfd)
        os.fsync(dfd)


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
