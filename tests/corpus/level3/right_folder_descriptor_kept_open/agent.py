"""Right: opens the checkpoint folder once per folder and keeps the descriptor for the whole run; each
save writes and fsyncs the temp file, renames it (dir_fd on both sides) and fdatasyncs the folder.
"""
import json
import os
from pathlib import Path

def make_folder(folder):
    """Create folder and any missing parents, fsyncing each parent that gained an entry."""
    folder = Path(folder).absolute()
    if folder.is_dir():
        return
    make_folder(folder.parent)
    try:
        folder.mkdir()
    except FileExistsError:
        pass
    sync_folder(folder.parent)


def sync_folder(folder):
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # a platform where a folder cannot be opened (Windows): nothing more can be done
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_folders = {}


def _folder_fd(directory):
    key = os.path.abspath(directory)
    if key not in _folders:
        make_folder(directory)
        try:
            _folders[key] = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except OSError:
            _folders[key] = None  # a platform where a folder cannot be opened
    return _folders[key]


def save_checkpoint(state, directory="checkpoints"):
    dfd = _folder_fd(directory)
    data = json.dumps(state).encode("utf-8")
    if dfd is None:
        with open(os.path.join(directory, "checkpoint.json.tmp"), "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(os.path.join(directory, "checkpoint.json.tmp"), os.path.join(directory, "checkpoint.json"))
        return
    fd = os.open("checkpoint.json.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=dfd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace("checkpoint.json.tmp", "checkpoint.json", src_dir_fd=dfd, dst_dir_fd=dfd)
    os.fdatasync(dfd)


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
