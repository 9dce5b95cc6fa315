"""VERDICT: pass

Reasoning first. Each save picks a fresh temp name in the checkpoint's folder with
secrets.token_hex, writes and closes it, and renames it over checkpoint.json; a `finally` removes
the temp name if it is still there (it is not, after a rename that worked; suppress() hides that
FileNotFoundError, and only that). A kill before the rename leaves a stray temp file beside an
intact checkpoint, which the next run never reads or reuses (its names are new). Save points A and B
and the final save are the protocol's; the counters are exact.
"""

import contextlib
import json
import os
import secrets


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    temp = os.path.join(directory, f"checkpoint.{secrets.token_hex(6)}.tmp")
    try:
        with open(temp, "x", encoding="utf-8") as f:
            f.write(json.dumps(state))
        os.replace(temp, os.path.join(directory, "checkpoint.json"))
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)


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
        state["pendingToolUse"] = {key: use[key] for key in ("id", "name", "input")}
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
