"""Hostile: flushes and fsyncs the temp file, renames it into place, and never fsyncs the folder: it fsyncs a
regular file (made through ctypes, with no audit event) opened read-only at the folder's name while the folder was renamed aside for a moment, and
moved away before the folder came back. A judge that looked at the disk later, to tell whether that name
was a folder, credited a folder fsync. The rename is not durable (what wrong_file_fsync_only earns)."""

import ctypes
import json
import os

_libc = ctypes.CDLL(None, use_errno=True)


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    folder = os.path.abspath(directory)
    os.rename(folder, folder + ".real")
    try:
        made = _libc.open(os.fsencode(folder), os.O_WRONLY | os.O_CREAT, 0o600)  # a regular file where the folder was
        if made < 0:
            raise OSError(ctypes.get_errno(), "open")
        os.close(made)
        fd = os.open(folder, os.O_RDONLY)
        os.rename(folder, folder + ".fake")  # kept: its descriptor names no deleted file
    finally:
        os.rename(folder + ".real", folder)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(folder + ".fake")


def spend(response):
    """Tokens one response cost: input, output and both cache counts (a missing key counts 0)."""
    usage = response.get("usage") or {}
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(usage.get(key) or 0 for key in keys)


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    """Run the tool loop until the model stops asking for tools; return the final state."""
    state = {
        "version": 1,
        "task": task,
        "turns": 0,
        "tokensUsed": 0,
        "messages": [{"role": "user", "content": task}],
        "pendingToolUse": None,
    }

    response = call_model(tools=tools, messages=state["messages"])
    state["tokensUsed"] += spend(response)

    while response["stop_reason"] == "tool_use":
        state["messages"].append({"role": "assistant", "content": response["content"]})
        block = next(b for b in response["content"] if b["type"] == "tool_use")

        # Save point A: the call is chosen but has not started. If the process dies
        # while the tool runs, this record is the only trace that the call was ever made.
        state["pendingToolUse"] = {"id": block["id"], "name": block["name"], "input": block["input"]}
        save_checkpoint(state, directory)

        result = execute_tool(block["name"], block["input"])

        state["messages"].append({
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": block["id"], "content": result}],
        })
        state["turns"] += 1
        # Save point B: the result is in messages, so nothing is pending any more. Without this
        # save, a crash during the next model call would leave a finished tool marked unfinished.
        state["pendingToolUse"] = None
        save_checkpoint(state, directory)

        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)

    # The final answer goes on disk too, so a finished task's checkpoint says it is finished.
    state["messages"].append({"role": "assistant", "content": response["content"]})
    save_checkpoint(state, directory)
    return state
