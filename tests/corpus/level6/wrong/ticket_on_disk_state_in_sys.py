"""Wrong: each save writes only a ticket number to checkpoint.json, atomically, and keeps the state
itself in memory, in ``sys``, where a fresh copy of the module does not reset it. Its loader reads
the ticket and hands back the state remembered under it. The files it writes are tiny and every
crash leaves a whole ticket, but after a real crash nothing in memory is left: the ticket names a
state no process has (PARSE)."""

import json
import os
import sys


def save_checkpoint(state, directory="checkpoints"):
    """Remember ``state`` under a new ticket, and write the ticket to ``<directory>/checkpoint.json``."""
    kept = sys.__dict__.setdefault("_kept_states", [])
    kept.append(json.dumps(state))
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"ticket": len(kept) - 1}, f)
    os.replace(tmp, path)


def load_checkpoint(directory="checkpoints"):
    """The state remembered under the ticket in checkpoint.json, or None if there is no checkpoint."""
    path = os.path.join(directory, "checkpoint.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        ticket = json.load(f)["ticket"]
    return json.loads(sys.__dict__.get("_kept_states", [])[ticket])


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

        # Save point A: the model has named a tool and it has not run yet. If the process dies
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
