"""Right: a class, pathlib for the files, pending calls kept in a dict keyed by id."""

import json
from pathlib import Path


class Checkpoint:
    def __init__(self, directory):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)

    def save(self, state):
        tmp = self.dir / "checkpoint.json.partial"
        tmp.write_text(json.dumps(state, ensure_ascii=False), encoding="utf-8")
        tmp.replace(self.dir / "checkpoint.json")


def save_checkpoint(state, directory="checkpoints"):
    Checkpoint(directory).save(state)


def spend(response):
    usage = response.get("usage") or {}
    return sum(usage.get(k) or 0 for k in ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                                            "cache_read_input_tokens"))


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    disk = Checkpoint(directory)
    state = {"version": 1, "task": task, "turns": 0, "tokensUsed": 0,
             "messages": [{"role": "user", "content": task}], "pendingToolUse": None}
    response = call_model(tools=tools, messages=state["messages"])
    state["tokensUsed"] += spend(response)
    while response["stop_reason"] == "tool_use":
        state["messages"].append({"role": "assistant", "content": response["content"]})
        waiting = {b["id"]: {"id": b["id"], "name": b["name"], "input": b["input"]}
                   for b in response["content"] if b["type"] == "tool_use"}
        state["pendingToolUse"] = list(waiting.values())
        disk.save(state)
        answers = []
        for call in list(waiting.values()):
            result = execute_tool(call["name"], call["input"])
            if not answers:
                state["messages"].append({"role": "user", "content": answers})
            answers.append({"type": "tool_result", "tool_use_id": call["id"], "content": result})
            state["turns"] += 1
            del waiting[call["id"]]
            state["pendingToolUse"] = list(waiting.values()) or None
            disk.save(state)
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)
    state["messages"].append({"role": "assistant", "content": response["content"]})
    disk.save(state)
    return state
