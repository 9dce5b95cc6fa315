"""The loops the walkthrough notebook crashes: two ways to write a file, two choices of save points.

``make_loop(save, points)`` builds a ``run_agent`` with the level-2 signature that calls ``save``
at save point A, at save point B, or at both (the final save always happens). Crossing the two
writers with the two choices gives the four implementations of the notebook's first picture;
``FIXED`` holds four different ways of writing the fix, for the picture that should be all green.
"""

import json
import os
import tempfile
from pathlib import Path


def save_in_place(state, directory="checkpoints"):
    """Overwrite checkpoint.json directly (what the level-2 starter does)."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "checkpoint.json"), "w", encoding="utf-8") as f:
        json.dump(state, f)


def save_atomic(state, directory="checkpoints"):
    """Write a temp file beside checkpoint.json, close it, then rename it over the old one."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(state, f)
    os.replace(path + ".tmp", path)  # after the `with`: the file is closed, so every byte reached the OS


def save_with_pathlib(state, directory="checkpoints"):
    """The same idea through pathlib: write_text opens, writes and closes before replace runs."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "checkpoint.json.tmp"
    tmp.write_text(json.dumps(state), encoding="utf-8")
    tmp.replace(folder / "checkpoint.json")


def save_with_tempfile(state, directory="checkpoints"):
    """A uniquely named temp file from tempfile, created in the checkpoint's own folder."""
    os.makedirs(directory, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=directory, suffix=".tmp", delete=False) as f:
        json.dump(state, f)
    os.replace(f.name, os.path.join(directory, "checkpoint.json"))


def save_with_os_calls(state, directory="checkpoints"):
    """No Python buffer at all: os.open and os.write hand every byte straight to the OS."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    data = json.dumps(state).encode("utf-8")
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]  # os.write may write fewer bytes than asked
    finally:
        os.close(fd)
    os.replace(path + ".tmp", path)


def make_loop(save, points="AB"):
    """A level-2 ``run_agent`` that saves with ``save`` at the save points named in ``points``."""

    def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
        state = {"version": 1, "task": task, "turns": 0, "tokensUsed": 0,
                 "messages": [{"role": "user", "content": task}], "pendingToolUse": None}
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)
        while response["stop_reason"] == "tool_use":
            state["messages"].append({"role": "assistant", "content": response["content"]})
            call = next(b for b in response["content"] if b["type"] == "tool_use")
            state["pendingToolUse"] = {"id": call["id"], "name": call["name"], "input": call["input"]}
            if "A" in points:
                save(state, directory)  # save point A: named, not yet run
            result = execute_tool(call["name"], call["input"])
            state["messages"].append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call["id"], "content": result}]})
            state["turns"] += 1
            state["pendingToolUse"] = None
            if "B" in points:
                save(state, directory)  # save point B: the result is recorded
            response = call_model(tools=tools, messages=state["messages"])
            state["tokensUsed"] += spend(response)
        state["messages"].append({"role": "assistant", "content": response["content"]})
        save(state, directory)
        return state

    run_agent.__name__ = f"run_agent_{save.__name__}_{points}"
    return run_agent


def spend(response):
    """Input, output and both cache counts of one response (a missing key counts 0)."""
    usage = response.get("usage") or {}
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(usage.get(key) or 0 for key in keys)


IMPLEMENTATIONS = {
    "in place + B only": make_loop(save_in_place, "B"),
    "atomic + B only": make_loop(save_atomic, "B"),
    "in place + A and B": make_loop(save_in_place, "AB"),
    "atomic + A and B": make_loop(save_atomic, "AB"),
}

FIXED = {
    "open, close, os.replace": make_loop(save_atomic, "AB"),
    "pathlib write_text + replace": make_loop(save_with_pathlib, "AB"),
    "tempfile in the same folder": make_loop(save_with_tempfile, "AB"),
    "os.open + os.write + os.replace": make_loop(save_with_os_calls, "AB"),
}
