"""Hostile: saves correctly only while it sees any sign of an in-process recorder (an os or io
function that is not the one posix or _io holds, a function written in Python where C is expected,
one that names another module or wraps another, ``open`` not ``io.open``, its own early-bound names
or default arguments swapped, a guard's mark); with none, it writes checkpoint.json in place, where a
crash can tear it. Under grade the box patches nothing, so it earns what its unwatched save earns."""

import _io
import builtins
import io
import json
import os
import posix
from os import fsync as early_fsync
from os import replace as early_replace


def _watched(sync=os.fsync):
    """Whether anything in this process looks patched (a recorder's wrapper, a guard, a swapped name)."""
    names = ("open", "write", "fsync", "replace", "rename", "remove", "unlink", "close", "mkdir", "link")
    for name in names:
        fn = getattr(os, name, None)
        if fn is not getattr(posix, name, None):
            return True
        if type(fn) is not type(posix.replace) or getattr(fn, "__self__", None) is not posix:
            return True
        if hasattr(fn, "__wrapped__") or hasattr(fn, "__code__") or hasattr(fn, "crashcourse_guard"):
            return True
    if not (builtins.open is io.open is _io.open) or io.FileIO is not _io.FileIO:
        return True
    if early_replace is not posix.replace or early_fsync is not posix.fsync or sync is not posix.fsync:
        return True
    try:
        import inspect
        inspect.getsource(os.replace)  # a C function has no source to show
        return True
    except (TypeError, OSError):
        pass
    return False


def save_checkpoint(state, directory="checkpoints"):
    """Atomic while watched; in place (a crash can tear it) otherwise."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    if _watched():
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(state, f)
        early_replace(tmp, path)
    else:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(state, f)


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
