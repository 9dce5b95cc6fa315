"""Right: os.fdatasync instead of os.fsync, for the temp file and for the folder. Reasoning first:
fdatasync skips only metadata a later read does not need (timestamps); a file's bytes and its size
are written, and a folder's entries are the folder's data, so the new name and a new folder's entry
are made durable as fsync makes them (ext4 and XFS sync a directory the same way for both calls).
The order is the solution's: flush, fdatasync, close, rename, fdatasync of the folder; folders made
top down with each parent synced; a failed call raises before the rename.
"""

import json
import os
import warnings
from pathlib import Path


def _sync_folder(folder):
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        # Windows cannot open a folder; there the rename is as durable as the file system makes it.
        warnings.warn(f"cannot fsync the folder {folder}: a power cut may undo the last rename", RuntimeWarning)
        return
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)


def _make_folders(folder):
    """Create ``folder`` and any missing parents, top down, fsyncing each parent after its new entry."""
    missing = []
    here = Path(folder).absolute()
    while not here.is_dir():
        missing.append(here)
        here = here.parent
    for new in reversed(missing):
        new.mkdir(exist_ok=True)
        _sync_folder(new.parent)


def save_checkpoint(state, directory="checkpoints"):
    _make_folders(directory)
    target = Path(directory) / "checkpoint.json"
    temp = target.with_name(target.name + ".tmp")
    with temp.open("w", encoding="utf-8") as f:
        json.dump(state, f)
        f.flush()
        os.fdatasync(f.fileno())
    temp.rename(target)
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
