"""Right: nothing is changed in place. Each result makes a new results message (the old content plus
the new block) that replaces the last message, and pendingToolUse is rebuilt as a tuple of the calls
not yet answered (saved as a JSON list, or null when none is left).
"""

import json
import os


def save_checkpoint(state, directory="checkpoints"):
    """Write the six protocol fields of ``state`` to ``<directory>/checkpoint.json``, all or nothing."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f)
    os.replace(tmp, path)


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
        blocks = [b for b in response["content"] if b["type"] == "tool_use"]

        state["pendingToolUse"] = [{"id": b["id"], "name": b["name"], "input": b["input"]} for b in blocks]
        save_checkpoint(state, directory)

        answered = 0
        for block in blocks:
            result = execute_tool(block["name"], block["input"])
            entry = {"type": "tool_result", "tool_use_id": block["id"], "content": result}
            if answered:
                last = state["messages"][-1]
                state["messages"] = state["messages"][:-1] + [{"role": "user", "content": [*last["content"], entry]}]
            else:
                state["messages"] = state["messages"] + [{"role": "user", "content": [entry]}]
            answered += 1
            state["turns"] += 1
            left = tuple(p for p in state["pendingToolUse"] if p["id"] != block["id"])
            state["pendingToolUse"] = list(left) if left else None
            save_checkpoint(state, directory)

        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)

    state["messages"].append({"role": "assistant", "content": response["content"]})
    save_checkpoint(state, directory)
    return state
