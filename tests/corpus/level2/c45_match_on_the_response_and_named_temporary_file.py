"""VERDICT: pass

Reasoning first. The loop reads each response with a match statement: a `tool_use` stop reason with
its content binds the call, anything else ends the loop. The save is tempfile.NamedTemporaryFile
with delete=False and dir= the checkpoint's folder, so the temp file is beside checkpoint.json on
the same file system; leaving the `with` closes it (Python's buffer reaches the kernel), and only then
does os.replace give it the real name. A kill anywhere leaves the old file or the new one, never a
torn one (M1, M2). Save point A holds the call before it runs, save point B the result with the
counters, and the final answer is saved; turns and tokensUsed (all four usage counts) stay exact.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Callable

USAGE = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def save_checkpoint(state: dict[str, Any], directory: str = "checkpoints") -> None:
    os.makedirs(directory, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=directory, prefix=".ckpt-", suffix=".json",
                                     delete=False) as f:
        json.dump(state, f)
    os.replace(f.name, os.path.join(directory, "checkpoint.json"))


def run_agent(task: str, tools: list, call_model: Callable[..., dict], execute_tool: Callable[[str, Any], str],
              directory: str = "checkpoints") -> dict:
    state = {"version": 1, "task": task, "turns": 0, "tokensUsed": 0,
             "messages": [{"role": "user", "content": task}], "pendingToolUse": None}

    def ask() -> dict:
        response = call_model(tools=tools, messages=state["messages"])
        usage = response.get("usage") or {}
        state["tokensUsed"] += sum(usage.get(k) or 0 for k in USAGE)
        return response

    response = ask()
    while True:
        match response:
            case {"stop_reason": "tool_use", "content": content}:
                state["messages"].append({"role": "assistant", "content": content})
                call = next(b for b in content if b["type"] == "tool_use")
                state["pendingToolUse"] = {"id": call["id"], "name": call["name"], "input": call["input"]}
                save_checkpoint(state, directory)
                output = execute_tool(call["name"], call["input"])
                state["messages"].append({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": call["id"], "content": output}]})
                state["turns"] += 1
                state["pendingToolUse"] = None
                save_checkpoint(state, directory)
                response = ask()
            case _:
                state["messages"].append({"role": "assistant", "content": response["content"]})
                save_checkpoint(state, directory)
                return state
