"""Right: one append-only file and no compaction at all, written with os.open(O_APPEND) and os.write.

The first line holds version and task; every save appends the new messages and the three fields
that change. The file is the history once over, so its total cost is linear without compaction.
"""

import json
import os

NAME = "log.jsonl"


def _append(directory, record):
    os.makedirs(directory, exist_ok=True)
    data = (json.dumps(record) + "\n").encode("utf-8")
    fd = os.open(os.path.join(directory, NAME), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


class Log:
    def __init__(self, directory):
        self.directory = directory
        self.count = None

    def save(self, state):
        if self.count is None:
            path = os.path.join(self.directory, NAME)
            if os.path.exists(path):
                os.remove(path)  # a new run starts a new log
            _append(self.directory, {"version": state["version"], "task": state["task"]})
            self.count = 0
        new = state["messages"][self.count:]
        _append(self.directory, {"add": new, "turns": state["turns"], "tokensUsed": state["tokensUsed"],
                                 "pendingToolUse": state["pendingToolUse"]})
        self.count = len(state["messages"])


def save_checkpoint(state, directory="checkpoints"):
    Log(directory).save(state)


def load_checkpoint(directory="checkpoints"):
    try:
        with open(os.path.join(directory, NAME), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    lines = data.split(b"\n")[:-1]  # the piece after the last newline never finished
    if len(lines) < 2:
        return None  # the header alone is not a save
    head = json.loads(lines[0])
    state = {"version": head["version"], "task": head["task"], "turns": 0, "tokensUsed": 0, "messages": [],
             "pendingToolUse": None}
    for raw in lines[1:]:
        rec = json.loads(raw)
        state["messages"] += rec["add"]
        state.update(turns=rec["turns"], tokensUsed=rec["tokensUsed"], pendingToolUse=rec["pendingToolUse"])
    return state


def spend(response):
    usage = response.get("usage") or {}
    return sum(usage.get(k) or 0 for k in ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                                            "cache_read_input_tokens"))


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    log = Log(directory)
    state = {"version": 1, "task": task, "turns": 0, "tokensUsed": 0,
             "messages": [{"role": "user", "content": task}], "pendingToolUse": None}
    response = call_model(tools=tools, messages=state["messages"])
    state["tokensUsed"] += spend(response)
    while response["stop_reason"] == "tool_use":
        state["messages"].append({"role": "assistant", "content": response["content"]})
        block = next(b for b in response["content"] if b["type"] == "tool_use")
        state["pendingToolUse"] = {"id": block["id"], "name": block["name"], "input": block["input"]}
        log.save(state)
        result = execute_tool(block["name"], block["input"])
        state["messages"].append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": block["id"], "content": result}]})
        state["turns"] += 1
        state["pendingToolUse"] = None
        log.save(state)
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)
    state["messages"].append({"role": "assistant", "content": response["content"]})
    log.save(state)
    return state
