"""VERDICT: fail ERROR

Reasoning first. The tool_result's tool_use_id is made up by the loop (f"call_{turns}") instead of
copying the id the model gave the tool_use block: the API matches a result to its call by that id
and refuses (400) a tool_use with no tool_result for its id right after it. The very first model
call after a tool runs is refused, so the loop never finishes: an uncrashed run raises.
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
        state["pendingToolUse"] = {"id": use["id"], "name": use["name"], "input": use["input"]}
        save_checkpoint(state, directory)
        result = execute_tool(use["name"], use["input"])
        state["messages"].append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"call_{state['turns']}", "content": result}]})
        state["turns"] += 1
        state["pendingToolUse"] = None
        save_checkpoint(state, directory)
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)
    state["messages"].append({"role": "assistant", "content": response["content"]})
    save_checkpoint(state, directory)
    return state
