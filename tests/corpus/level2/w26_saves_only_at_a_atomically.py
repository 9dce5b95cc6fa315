"""VERDICT: fail ERROR,FRESH,WHOLE

Writes through a temp file and os.replace, but only before each tool runs (save point A): no save
once a result is in, and none after the model's last answer.
"""
import json
import os


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    target = os.path.join(directory, "checkpoint.json")
    scratch = target + ".partial"
    with open(scratch, "w", encoding="utf-8") as out:
        out.write(json.dumps(state))
    os.replace(scratch, target)


def tokens_of(response):
    usage = response.get("usage") or {}
    return sum(usage.get(k) or 0 for k in ("input_tokens", "output_tokens",
                                             "cache_creation_input_tokens", "cache_read_input_tokens"))


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    state = {"version": 1, "task": task, "turns": 0, "tokensUsed": 0,
             "messages": [{"role": "user", "content": task}], "pendingToolUse": None}
    reply = call_model(tools=tools, messages=state["messages"])
    state["tokensUsed"] += tokens_of(reply)
    while reply["stop_reason"] == "tool_use":
        state["messages"].append({"role": "assistant", "content": reply["content"]})
        call = [b for b in reply["content"] if b["type"] == "tool_use"][0]
        state["pendingToolUse"] = {"id": call["id"], "name": call["name"], "input": call["input"]}
        save_checkpoint(state, directory)
        output = execute_tool(call["name"], call["input"])
        state["messages"].append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call["id"], "content": output}]})
        state["turns"] += 1
        state["pendingToolUse"] = None
        reply = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += tokens_of(reply)
    state["messages"].append({"role": "assistant", "content": reply["content"]})
    return state
