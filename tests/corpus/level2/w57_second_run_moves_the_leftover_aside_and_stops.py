"""VERDICT: fail RERUN

Saves well (temp file, then a rename), but a run that finds the temp file a crash left moves it
aside with the `mv` command and stops, asking a person to look. The next run then starts, but only
after someone has cleared the folder by hand: a crash must never stop the loop from going on. The
move is made by another program, which the in-process recorder does not see; the second run is
still told as the run that stopped (it was once passed over whenever its recording lacked a step,
which under grade's kernel trace depended on the machine's load).
"""


import json
import os
import subprocess


def save_checkpoint(state, directory="checkpoints"):
    """Write the six protocol fields of ``state`` to ``<directory>/checkpoint.json``, all or nothing."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    # The temp file sits beside the real one: a rename inside one file system swaps the name in one
    # step, so other processes (and whatever runs after this one is killed) see the old file or the
    # new one; a rename from /tmp may turn into a copy a crash can tear. A power cut is level 3's.
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f)
    # Leaving the `with` block closes the file, which pushes Python's buffer to the OS. Only now
    # is the temp file complete, so only now may it take the real name.
    os.replace(tmp, path)  # one step on POSIX; unlike os.rename, it also replaces an existing file on Windows


def spend(response):
    """Tokens one response cost: input, output and both cache counts (a missing key counts 0)."""
    usage = response.get("usage") or {}
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(usage.get(key) or 0 for key in keys)


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    """Run the tool loop until the model stops asking for tools; return the final state."""
    leftover = os.path.join(directory, "checkpoint.json.tmp")
    if os.path.exists(leftover):
        # Keep the unfinished save for a person to look at, and refuse to start over it.
        subprocess.run(["mv", leftover, leftover + ".bak"], check=True)
        raise RuntimeError(f"found an unfinished save; moved it to {leftover}.bak: look at it, then run again")
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
