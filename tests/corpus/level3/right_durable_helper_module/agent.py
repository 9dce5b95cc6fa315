"""Right: the durable write lives in a helper module of the learner's own (durable.py, beside agent.py),
imported by name. Reasoning first: the helper writes the temp file with os.write in a loop (a write may
take fewer bytes), os.fdatasync before closing (the data and the size are on disk; fdatasync skips only
timestamps), os.replace, then fsyncs the folder opened with O_DIRECTORY where the platform has it;
new folders are made one level at a time, each parent fsynced. A failed fdatasync raises before the
rename. The loop is the protocol's. M1 to M5 hold.
"""

import json
import os

from durable import replace_durably


def save_checkpoint(state, directory="checkpoints"):
    replace_durably(os.path.join(directory, "checkpoint.json"), json.dumps(state).encode("utf-8"))


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
            {"type": "tool_result", "tool_use_id": use["id"], "content": result}]})
        state["turns"] += 1
        state["pendingToolUse"] = None
        save_checkpoint(state, directory)
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)
    state["messages"].append({"role": "assistant", "content": response["content"]})
    save_checkpoint(state, directory)
    return state
