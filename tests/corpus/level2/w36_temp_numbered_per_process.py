"""VERDICT: fail RERUN

Numbers its temp files with a counter kept in the module (checkpoint.json.0.tmp, .1.tmp, ...) and
opens each with "x". In one process the numbers never repeat. But a process started after a kill
counts from 0 again, and when the kill left checkpoint.json.3.tmp behind, that run's fourth save
raises FileExistsError, and so does every run after it. A second run inside the process that
crashed would have gone on counting from where the first stopped and never met the leftover: the
kit starts each second run in a process of its own, as a restart after a crash is.
"""


import itertools
import json
import os


# Each save gets a temp name of its own, numbered in this process, so that (the author thought) no
# two saves can ever meet on one name.
_saves = itertools.count()


def save_checkpoint(state, directory="checkpoints"):
    """Write the six protocol fields of ``state`` to ``<directory>/checkpoint.json``, all or nothing."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    # The temp file sits beside the real one: a rename inside one directory (one file system) is
    # atomic, while a rename from /tmp may turn into a copy that a crash can tear.
    tmp = f"{path}.{next(_saves)}.tmp"
    with open(tmp, "x", encoding="utf-8") as f:  # "x": never write over another save's temp file
        json.dump(state, f)
    # Leaving the `with` block closes the file, which pushes Python's buffer to the OS. Only now
    # is the temp file complete, so only now may it take the real name.
    os.replace(tmp, path)  # replaces an existing checkpoint in one step (os.rename fails on Windows)


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
