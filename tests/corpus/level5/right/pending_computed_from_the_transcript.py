"""Right: pendingToolUse is never kept by hand. Each save works it out from the transcript: the calls
of the last assistant message that have no tool_result yet in the message after it.
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


def pending_calls(messages):
    """The calls of the last assistant turn still waiting for a result, or None."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i]["role"] == "assistant":
            calls = [b for b in messages[i]["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
            after = messages[i + 1]["content"] if i + 1 < len(messages) else []
            done = {b["tool_use_id"] for b in after if isinstance(b, dict) and b.get("type") == "tool_result"}
            left = [{"id": b["id"], "name": b["name"], "input": b["input"]} for b in calls if b["id"] not in done]
            return left or None
    return None


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

        results_message = None
        for block in blocks:
            result = execute_tool(block["name"], block["input"])
            if results_message is None:
                results_message = {"role": "user", "content": []}
                state["messages"].append(results_message)
            results_message["content"].append({"type": "tool_result", "tool_use_id": block["id"], "content": result})
            state["turns"] += 1
            state["pendingToolUse"] = pending_calls(state["messages"])
            save_checkpoint(state, directory)

        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)

    state["messages"].append({"role": "assistant", "content": response["content"]})
    save_checkpoint(state, directory)
    return state
