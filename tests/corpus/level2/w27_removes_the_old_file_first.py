"""VERDICT: fail TRACE

Reaches both save points and writes a temp file, but deletes checkpoint.json before renaming the
new one in: for a moment there is no checkpoint at all, so a crash there loses the call in flight.
"""
import json
import os


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    final_path = os.path.join(directory, "checkpoint.json")
    fresh = os.path.join(directory, "checkpoint.new")
    with open(fresh, "w", encoding="utf-8") as handle:
        json.dump(state, handle)
    if os.path.exists(final_path):
        os.unlink(final_path)
    os.rename(fresh, final_path)


def used(response):
    usage = response.get("usage") or {}
    return sum(usage.get(k) or 0 for k in ("input_tokens", "output_tokens",
                                             "cache_creation_input_tokens", "cache_read_input_tokens"))


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    state = {"version": 1, "task": task, "turns": 0, "tokensUsed": 0,
             "messages": [{"role": "user", "content": task}], "pendingToolUse": None}
    response = call_model(tools=tools, messages=state["messages"])
    state["tokensUsed"] += used(response)
    while response["stop_reason"] == "tool_use":
        state["messages"].append({"role": "assistant", "content": response["content"]})
        wanted = next(b for b in response["content"] if b["type"] == "tool_use")
        state["pendingToolUse"] = {"id": wanted["id"], "name": wanted["name"], "input": wanted["input"]}
        save_checkpoint(state, directory)
        text = execute_tool(wanted["name"], wanted["input"])
        state["messages"].append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": wanted["id"], "content": text}]})
        state["turns"] += 1
        state["pendingToolUse"] = None
        save_checkpoint(state, directory)
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += used(response)
    state["messages"].append({"role": "assistant", "content": response["content"]})
    save_checkpoint(state, directory)
    return state
