"""A context manager of its own: the file is written inside the with block; on a clean exit it is
flushed, fsynced, closed, renamed into place, and the folder fsynced. New folders are made with
their parent fsynced."""

import json
import os


class AtomicDurableFile:
    def __init__(self, path):
        self.path = path
        self.tmp = path + ".writing"

    def __enter__(self):
        self.file = open(self.tmp, "w", encoding="utf-8")
        return self.file

    def __exit__(self, kind, value, tb):
        if kind is not None:
            self.file.close()
            return False
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        os.replace(self.tmp, self.path)
        sync_folder(os.path.dirname(self.path))
        return False


def sync_folder(folder):
    try:
        fd = os.open(folder or ".", os.O_RDONLY)
    except OSError:
        return  # a platform that cannot open a folder (Windows): the rename is as durable as it gets there
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_folder(folder):
    folder = os.path.abspath(folder)
    if os.path.isdir(folder):
        return
    make_folder(os.path.dirname(folder))
    os.mkdir(folder)
    sync_folder(os.path.dirname(folder))


def save_checkpoint(state, directory="checkpoints"):
    make_folder(directory)
    with AtomicDurableFile(os.path.join(directory, "checkpoint.json")) as f:
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
