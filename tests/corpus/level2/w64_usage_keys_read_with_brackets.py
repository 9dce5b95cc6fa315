"""VERDICT: fail ERROR

Reasoning first. Spend is read with square brackets: usage["cache_creation_input_tokens"] and
usage["cache_read_input_tokens"]. The protocol counts absent usage keys as 0, because a response
need not carry them (an API version or a model without prompt caching leaves them out, and they may
be null). On such a response the loop raises KeyError (or TypeError on a null) and never finishes.
Everything else is right: atomic saves at A, B and the end.
"""

import json
import os


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(state, f)
    os.replace(path + ".tmp", path)


def spend(response):
    usage = response["usage"]
    return (usage["input_tokens"] + usage["output_tokens"] + usage["cache_creation_input_tokens"]
            + usage["cache_read_input_tokens"])


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    state = {"version": 1, "task": task, "turns": 0, "tokensUsed": 0,
             "messages": [{"role": "user", "content": task}], "pendingToolUse": None}
    response = call_model(tools=tools, messages=state["messages"])
    state["tokensUsed"] += spend(response)
    while response["stop_reason"] == "tool_use":
        state["messages"].append({"role": "assistant", "content": response["content"]})
        use = next(b for b in response["content"] if b["type"] == "tool_use")
        state["pendingToolUse"] = {"id": use["id"], "name": use["name"], "input": use["input"]}
        save_checkpoint(state, directory)
        result = execute_tool(use["name"], use["input"])
        state["messages"].append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": use["id"], "content": result}]})
        state["turns"] += 1
        state["pendingToolUse"] = None
        save_checkpoint(state, directory)
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)
    state["messages"].append({"role": "assistant", "content": response["content"]})
    save_checkpoint(state, directory)
    return state
