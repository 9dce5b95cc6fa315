"""Wrong: each tool_result carries an id the loop makes up
(f"result-{turns}") rather than the id of the tool_use it answers. Reasoning first: saves land at the
right moments, but the API pairs results with calls by id: the first model call after a turn's
results is a 400 (the turn's tool_use ids have no tool_result), so an uncrashed run never finishes.
"""

import json
import os


def save_checkpoint(state, directory="checkpoints"):
    """Write the six protocol fields of ``state`` to ``<directory>/checkpoint.json``, all or nothing."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    # Same as level 2: a temp file beside the real one, closed before it takes the real name.
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

        # Save point A: every call the model named is pending before the first one runs. A crash
        # during the second call must still show the second and third as started-or-waiting, or
        # resume cannot tell which of them already posted, emailed or charged something.
        state["pendingToolUse"] = [{"id": b["id"], "name": b["name"], "input": b["input"]} for b in blocks]
        save_checkpoint(state, directory)

        # The API wants all of a turn's results in the one user message right after the assistant
        # message, so that message is created with the first result and grows with each later one.
        results_message = None
        for block in blocks:
            result = execute_tool(block["name"], block["input"])

            if results_message is None:
                results_message = {"role": "user", "content": []}
                state["messages"].append(results_message)
            results_message["content"].append({"type": "tool_result", "tool_use_id": f"result-{state['turns']}", "content": result})
            state["turns"] += 1
            # The call leaves the pending list the moment its result is in messages: a call in both
            # places would be reconciled (perhaps run again) although its result is recorded.
            state["pendingToolUse"] = [p for p in state["pendingToolUse"] if p["id"] != block["id"]] or None
            # Save point B, once per result: a result that is back is on disk before the next tool
            # starts. Saving once at the end of the turn would lose it to a crash in a later tool.
            save_checkpoint(state, directory)

        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)

    state["messages"].append({"role": "assistant", "content": response["content"]})
    save_checkpoint(state, directory)
    return state
