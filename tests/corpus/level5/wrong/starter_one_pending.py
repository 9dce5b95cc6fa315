"""Wrong: the shipped starter. Only the first call is pending; results are saved once, at the end of the turn.

Expect: PAIRING, KEPT.
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

        first = blocks[0]
        state["pendingToolUse"] = [{"id": first["id"], "name": first["name"], "input": first["input"]}]
        save_checkpoint(state, directory)

        results = []
        for block in blocks:
            result = execute_tool(block["name"], block["input"])
            results.append({"type": "tool_result", "tool_use_id": block["id"], "content": result})

        state["messages"].append({"role": "user", "content": results})
        state["turns"] += len(results)
        state["pendingToolUse"] = None
        save_checkpoint(state, directory)

        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)

    state["messages"].append({"role": "assistant", "content": response["content"]})
    save_checkpoint(state, directory)
    return state
