"""VERDICT: pass

Reasoning first. The temp file is opened with buffering=0, so every write goes straight to the
kernel (a raw FileIO); since a raw write may take fewer bytes than it was given, the save loops on
what write returns until the whole document is written. The temp file is in the checkpoint's
folder and is renamed with os.replace after the `with` block closes it. Nothing waits in a Python
buffer at the rename, so a kill leaves the previous save or this one (M1); a write torn by the kill
only tears the temp file, which no name points to yet (M2). Save points A, B and the final answer
are the protocol's.
"""

import json
import os


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    target = os.path.join(directory, "checkpoint.json")
    data = memoryview(json.dumps(state, ensure_ascii=False).encode("utf-8"))
    with open(target + ".partial", "wb", buffering=0) as raw:
        while data:
            data = data[raw.write(data):]
    os.replace(target + ".partial", target)


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
        use = [b for b in response["content"] if b["type"] == "tool_use"][0]
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
