"""Level 4: resume a task from its checkpoint. As shipped, resume believes whatever it finds.

``resume_agent`` reads ``<directory>/checkpoint.json`` after a crash and carries the task on to its
end, saving as it goes, exactly like ``run_agent`` would have. It works on the file of a run that
stopped cleanly between two turns. It goes wrong three ways: it trusts any file (a torn one, one from
a future version, no file at all), it ignores ``pendingToolUse``, and it restarts its counters at
zero. Fix all three; keep the names and signatures as they are.

Run the grader with:  pytest exercises/level4
Ask for a nudge with: crashcourse hint 4
"""

import json
import os

MAX_TURNS = 20  # the most tool turns one task may take, counted over the whole task


class CheckpointError(Exception):
    """A checkpoint that resume cannot trust: missing, torn, malformed, or from an unknown version."""


def save_checkpoint(state, directory="checkpoints"):
    """Write the six protocol fields of ``state`` to ``<directory>/checkpoint.json``, all or nothing, durably."""
    path = os.path.join(directory, "checkpoint.json")
    fields = ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump({key: state[key] for key in fields}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # a platform that cannot open a folder (Windows): the rename is as durable as it gets
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_checkpoint(directory="checkpoints"):
    """Read ``<directory>/checkpoint.json``."""
    with open(os.path.join(directory, "checkpoint.json"), encoding="utf-8") as f:
        return json.load(f)


def spend(response):
    """Tokens one response cost: input, output and both cache counts (a missing key counts 0)."""
    usage = response.get("usage") or {}
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(usage.get(key) or 0 for key in keys)


def resume_agent(tools, call_model, execute_tool, directory="checkpoints"):
    """Carry the task in ``<directory>/checkpoint.json`` on to its end; return the final state."""
    saved = load_checkpoint(directory)
    last = saved["messages"][-1]
    if last["role"] == "assistant" and not any(b.get("type") == "tool_use" for b in last["content"]):
        return saved  # the task had already finished

    state = {
        "version": 1,
        "task": saved["task"],
        "turns": 0,
        "tokensUsed": 0,
        "messages": saved["messages"],
        "pendingToolUse": None,
    }

    while state["turns"] < MAX_TURNS:
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)
        state["messages"].append({"role": "assistant", "content": response["content"]})
        if response["stop_reason"] != "tool_use":
            break
        block = next(b for b in response["content"] if b["type"] == "tool_use")

        state["pendingToolUse"] = {"id": block["id"], "name": block["name"], "input": block["input"]}
        save_checkpoint(state, directory)  # save point A
        result = execute_tool(block["name"], block["input"])
        state["messages"].append({
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": block["id"], "content": result}],
        })
        state["turns"] += 1
        state["pendingToolUse"] = None
        save_checkpoint(state, directory)  # save point B

    save_checkpoint(state, directory)
    return state
