"""Level 5: one turn, several tools. The checkpoint keeps track of only one of them. Fix that.

The model may name several tools in one turn (three months of tickets listed at once, say). This
loop runs them all, but its checkpoint was written for one call per turn: a crash in the middle
of the turn leaves calls that started with no trace on disk, and results that came back with no
record either. Find both problems, fix both, and keep the function signatures as they are.

The protocol for this level (README.md has the full version):
  - pendingToolUse is null when nothing is pending, or a list of {id, name, input}: every call the
    model named whose result is not in messages yet.
  - all of a turn's results go into ONE user message, right after the assistant message.
  - turns counts tool results (one per call).

Run the grader with:  pytest exercises/level5
Ask for a nudge with: crashcourse hint 5
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
