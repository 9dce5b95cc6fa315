"""os.open with O_EXCL on a temp name after removing one a crash may have left, an os.write loop,
os.fdatasync, os.replace, then the folder fsynced through an O_DIRECTORY descriptor."""

import json
import os


def _fsync_folder(path):
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # a platform that cannot open a folder (Windows): the rename is as durable as it gets there
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
    path = os.path.join(directory, "checkpoint.json")
    tmp = path + ".tmp"
    try:
        os.unlink(tmp)  # a crash may have left one; O_EXCL below insists on a new file
    except FileNotFoundError:
        pass
    data = json.dumps(state).encode("utf-8")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        done = 0
        while done < len(data):
            done += os.write(fd, data[done:])
        os.fdatasync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_folder(directory)


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
