"""A generator walks the calls of each turn; pending calls are kept in a dict keyed by id and written
as a list (None once empty); saves go through pathlib with a temp name beside the checkpoint."""

import json
from pathlib import Path


def save_checkpoint(state, directory="checkpoints"):
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "checkpoint.json.tmp"
    tmp.write_text(json.dumps(state), encoding="utf-8")
    tmp.replace(folder / "checkpoint.json")


def spend(response):
    usage = response.get("usage") or {}
    return sum(usage.get(k) or 0 for k in ("input_tokens", "output_tokens",
                                            "cache_creation_input_tokens", "cache_read_input_tokens"))


def _results(blocks, execute_tool):
    for block in blocks:
        yield block, execute_tool(block["name"], block["input"])


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    state = {"version": 1, "task": task, "turns": 0, "tokensUsed": 0,
             "messages": [{"role": "user", "content": task}], "pendingToolUse": None}
    response = call_model(tools=tools, messages=state["messages"])
    state["tokensUsed"] += spend(response)
    while response["stop_reason"] == "tool_use":
        state["messages"].append({"role": "assistant", "content": response["content"]})
        blocks = [b for b in response["content"] if b["type"] == "tool_use"]
        pending = {b["id"]: {"id": b["id"], "name": b["name"], "input": b["input"]} for b in blocks}
        state["pendingToolUse"] = list(pending.values())
        save_checkpoint(state, directory)
        answers = {"role": "user", "content": []}
        for block, result in _results(blocks, execute_tool):
            if not answers["content"]:
                state["messages"].append(answers)
            answers["content"].append({"type": "tool_result", "tool_use_id": block["id"], "content": result})
            del pending[block["id"]]
            state["turns"] += 1
            state["pendingToolUse"] = list(pending.values()) or None
            save_checkpoint(state, directory)
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)
    state["messages"].append({"role": "assistant", "content": response["content"]})
    save_checkpoint(state, directory)
    return state
