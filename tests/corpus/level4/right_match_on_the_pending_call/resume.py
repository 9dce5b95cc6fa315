"""Right: at least once, keyed by the call's id, with the file read through one match statement.

Reasoning first. The file is read as bytes and decoded strictly (not UTF-8 and not JSON are both
ValueErrors, made CheckpointError); one match statement checks the version first (a guard on the exact
type refuses true and 1.0), then the six fields and their types (int patterns exclude bool through the
guard), then what is pending against the last assistant message. A pending call is run again under
its tool_use id as the idempotency key, so a tool that already applied it returns the first result;
its result is saved (B) before the model is called. Counters go on from the file; every response adds
its four usage counts; the cap is MAX_TURNS, read at each turn; a finished file is returned untouched.
"""

from __future__ import annotations

import json
import os
from typing import Any

MAX_TURNS = 20
FIELDS = ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")


class CheckpointError(Exception):
    pass


class UnsupportedVersion(CheckpointError):
    pass


def _save(state: dict[str, Any], directory: str) -> None:
    path = os.path.join(directory, "checkpoint.json")
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        data = json.dumps({k: state[k] for k in FIELDS}).encode("utf-8")
        while data:
            data = data[os.write(fd, data):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(path + ".tmp", path)


def _calls(message: Any) -> list:
    if not isinstance(message, dict) or message.get("role") != "assistant" or not isinstance(message.get("content"), list):
        return []
    return [{"id": b.get("id"), "name": b.get("name"), "input": b.get("input")}
            for b in message["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]


def _load(directory: str) -> dict[str, Any]:
    path = os.path.join(directory, "checkpoint.json")
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read().decode("utf-8", errors="strict"))
    except FileNotFoundError:
        raise CheckpointError(f"no checkpoint at {path}") from None
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path} is unreadable: {exc}") from exc
    match data:
        case {"version": v} if type(v) is not int or v != 1:
            raise UnsupportedVersion(f"{path} is version {v!r}")
        case {"version": _, "task": str(), "turns": int(t), "tokensUsed": int(u), "messages": [dict(), *rest],
              "pendingToolUse": None | dict()} if type(t) is int and type(u) is int and all(
                  isinstance(m, dict) for m in rest):
            pass
        case dict() if "version" not in data:
            raise UnsupportedVersion(f"{path} has no version")
        case _:
            raise CheckpointError(f"{path} does not hold the six fields with their types")
    calls = _calls(data["messages"][-1])
    pending = data["pendingToolUse"]
    if (pending is None) != (not calls) or pending is not None and calls[0] != pending:
        raise CheckpointError(f"{path}: pendingToolUse does not match the end of messages")
    return {k: data[k] for k in FIELDS}


def _spend(response: dict) -> int:
    usage = response.get("usage") or {}
    return sum(usage.get(k) or 0 for k in ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                                            "cache_read_input_tokens"))


def _run_and_record(state: dict, call: dict, execute_tool: Any, directory: str) -> None:
    result = execute_tool(call["name"], call["input"], tool_use_id=call["id"])
    state["messages"].append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call["id"], "content": result}]})
    state["turns"] += 1
    state["pendingToolUse"] = None
    _save(state, directory)


def resume_agent(tools, call_model, execute_tool, directory="checkpoints"):
    state = _load(directory)
    match state:
        case {"pendingToolUse": dict() as call}:
            _run_and_record(state, call, execute_tool, directory)
        case {"messages": [*_, {"role": "assistant"}]}:
            return state
    while state["turns"] < MAX_TURNS:
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += _spend(response)
        state["messages"].append({"role": "assistant", "content": response["content"]})
        calls = _calls(state["messages"][-1])
        if response["stop_reason"] != "tool_use" or not calls:
            break
        state["pendingToolUse"] = calls[0]
        _save(state, directory)
        _run_and_record(state, calls[0], execute_tool, directory)
    _save(state, directory)
    return state
