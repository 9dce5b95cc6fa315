"""VERDICT: fail PAIRING

Reasoning first. pendingToolUse is written as {"id", "name", "input"}, but `input` is
json.dumps(block["input"]): a string holding JSON rather than the object the model sent. Every other
part is right. A resume that re-runs the call passes a string where the tool expects its arguments
(or has to guess that it must parse it), and the file no longer matches the tool_use block in
`messages` it stands for. The protocol's pendingToolUse holds the input as the model gave it.
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
    usage = response.get("usage") or {}
    return sum(usage.get(k) or 0 for k in ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                                            "cache_read_input_tokens"))


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    state = {"version": 1, "task": task, "turns": 0, "tokensUsed": 0,
             "messages": [{"role": "user", "content": task}], "pendingToolUse": None}
    response = call_model(tools=tools, messages=state["messages"])
    state["tokensUsed"] += spend(response)
    while response["stop_reason"] == "tool_use":
        state["messages"].append({"role": "assistant", "content": response["content"]})
        use = next(b for b in response["content"] if b["type"] == "tool_use")
        state["pendingToolUse"] = {"id": use["id"], "name": use["name"], "input": json.dumps(use["input"])}
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
