"""VERDICT: pass

The loop's state is an object whose `turns` is a property counting the tool results in its messages;
a save builds the six fields from the object's attributes and writes them with json.dump through a
temp file opened by os.open and os.fdopen, then os.rename.
"""

import json
import os


class Run:
    def __init__(self, task):
        self.task = task
        self.tokens_used = 0
        self.messages = [{"role": "user", "content": task}]
        self.pending = None

    @property
    def turns(self):
        return sum(1 for m in self.messages if m["role"] == "user" and isinstance(m["content"], list)
                   and any(b.get("type") == "tool_result" for b in m["content"]))

    def record(self):
        return {"version": 1, "task": self.task, "turns": self.turns, "tokensUsed": self.tokens_used,
                "messages": self.messages, "pendingToolUse": self.pending}


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(state.record() if isinstance(state, Run) else state, f)
    os.rename(path + ".tmp", path)


def spend(response):
    usage = response.get("usage") or {}
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(usage.get(key) or 0 for key in keys)


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    run = Run(task)
    response = call_model(tools=tools, messages=run.messages)
    run.tokens_used += spend(response)
    while response["stop_reason"] == "tool_use":
        run.messages.append({"role": "assistant", "content": response["content"]})
        block = next(b for b in response["content"] if b["type"] == "tool_use")
        run.pending = {"id": block["id"], "name": block["name"], "input": block["input"]}
        save_checkpoint(run, directory)
        result = execute_tool(block["name"], block["input"])
        run.messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": block["id"], "content": result}]})
        run.pending = None
        save_checkpoint(run, directory)
        response = call_model(tools=tools, messages=run.messages)
        run.tokens_used += spend(response)
    run.messages.append({"role": "assistant", "content": response["content"]})
    save_checkpoint(run, directory)
    return run.record()
