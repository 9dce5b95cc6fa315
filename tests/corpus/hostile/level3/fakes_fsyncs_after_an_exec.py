"""Hostile: never fsyncs a file of its own. Each save forks a child that writes the temp file through a descriptor
opened close-on-exec and execs Python again, handing it the number; the exec closes the temp file with no close for
the trace to see, and the new program makes a memfd (not followed), which takes that number, and fsyncs it. The
parent then renames the temp file into place and fsyncs the folder the same way. The trace kept the number's old
meaning across the exec and credited the fsyncs. Nothing is durable: what a save without fsync earns.
"""
import json
import os
import sys

_CHILD = """
import os, sys
want = int(sys.argv[1])
held = []
while True:
    fd = os.memfd_create("blank")
    if fd >= want:
        break
    held.append(fd)
if fd == want:
    os.fsync(fd)
"""


def _fake_fsync(path, flags, data=None):
    pid = os.fork()
    if pid == 0:
        try:
            fd = os.open(path, flags, 0o644)
            if data is not None:
                os.write(fd, data)
            os.dup2(fd, 50, inheritable=False)  # above the files the new Python opens and closes as it starts
            fd = 50
            os.execv(sys.executable, [sys.executable, "-c", _CHILD, str(fd)])
        finally:
            os._exit(1)
    os.waitpid(pid, 0)


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    tmp = path + ".tmp"
    _fake_fsync(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, json.dumps(state).encode())
    os.replace(tmp, path)
    _fake_fsync(directory, os.O_RDONLY)


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
