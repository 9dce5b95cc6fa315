"""Wrong: like a ticket kept in ``sys``, but the states live in ``builtins`` and the ticket is a
random name: each save writes the name to checkpoint.json, atomically, and the loader looks the
state up in memory by that name. In the process that ran the loop it finds it; after a real crash
the name points at nothing (PARSE)."""

import json
import os
import builtins
import uuid


def save_checkpoint(state, directory="checkpoints"):
    """Remember ``state`` under a new random name, and write the name to ``<directory>/checkpoint.json``."""
    kept = builtins.__dict__.setdefault("_kept_states", {})
    name = uuid.uuid4().hex
    kept[name] = json.dumps(state)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"ticket": name}, f)
    os.replace(tmp, path)


def load_checkpoint(directory="checkpoints"):
    """The state remembered under the name in checkpoint.json, or None if there is no checkpoint."""
    path = os.path.join(directory, "checkpoint.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        ticket = json.load(f)["ticket"]
    return json.loads(builtins.__dict__.get("_kept_states", {})[ticket])


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
