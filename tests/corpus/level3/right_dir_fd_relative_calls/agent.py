"""Every call names its file relative to one descriptor of the checkpoint folder (dir_fd, src_dir_fd,
dst_dir_fd); the temp file is fsynced before the rename and the folder descriptor after it. New folders
are made one by one with their parent fsynced."""

import json
import os


def _fsync_folder(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return  # a platform that cannot open a folder (Windows)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_directory(directory):
    directory = os.path.abspath(directory)
    if os.path.isdir(directory):
        return
    _make_directory(os.path.dirname(directory))
    os.mkdir(directory)
    _fsync_folder(os.path.dirname(directory))


def save_checkpoint(state, directory="checkpoints"):
    _make_directory(directory)
    data = json.dumps(state).encode("utf-8")
    try:
        folder = os.open(directory, os.O_RDONLY)
    except OSError:
        folder = None  # Windows: no descriptor for a folder, so plain paths
    if folder is None:
        path = os.path.join(directory, "checkpoint.json")
        with open(path + ".tmp", "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".tmp", path)
        return
    try:
        fd = os.open("checkpoint.json.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=folder)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace("checkpoint.json.tmp", "checkpoint.json", src_dir_fd=folder, dst_dir_fd=folder)
        os.fsync(folder)
    finally:
        os.close(folder)


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
