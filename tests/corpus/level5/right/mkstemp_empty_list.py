"""Right: mkstemp and os.write; the results message is created empty at save point A, and an empty
pending list stands for nothing pending (both allowed by the level's protocol)."""

import json
import os
import tempfile


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".ckpt-")
    data = json.dumps(state).encode("utf-8")
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.close(fd)
    os.replace(tmp, os.path.join(directory, "checkpoint.json"))


def spend(response):
    usage = response.get("usage") or {}
    return sum(usage.get(k) or 0 for k in ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                                            "cache_read_input_tokens"))


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    state = {"version": 1, "task": task, "turns": 0, "tokensUsed": 0,
             "messages": [{"role": "user", "content": task}], "pendingToolUse": []}
    response = call_model(tools=tools, messages=state["messages"])
    state["tokensUsed"] += spend(response)
    while response["stop_reason"] == "tool_use":
        state["messages"].append({"role": "assistant", "content": response["content"]})
        blocks = [b for b in response["content"] if b["type"] == "tool_use"]
        answers = {"role": "user", "content": []}
        state["messages"].append(answers)
        state["pendingToolUse"] = [{"id": b["id"], "name": b["name"], "input": b["input"]} for b in blocks]
        save_checkpoint(state, directory)
        for b in blocks:
            answers["content"].append({"type": "tool_result", "tool_use_id": b["id"],
                                       "content": execute_tool(b["name"], b["input"])})
            state["turns"] += 1
            state["pendingToolUse"] = [p for p in state["pendingToolUse"] if p["id"] != b["id"]]
            save_checkpoint(state, directory)
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)
    state["messages"].append({"role": "assistant", "content": response["content"]})
    save_checkpoint(state, directory)
    return state
