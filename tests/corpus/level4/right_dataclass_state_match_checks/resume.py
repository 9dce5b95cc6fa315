"""At most once: the state is a dataclass, the file's shape is checked with one match statement (types
through guards, so `true` is no int), writes go through os.open and os.fdatasync, and a pending call
is answered with an is_error result."""

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

MAX_TURNS = 20

# Policy: at most once. A call left pending is not run again; it is answered with an error result
# saying it was interrupted, and the model decides (publish_table takes no idempotency key we trust).


class CheckpointError(Exception):
    pass


class UnsupportedVersion(CheckpointError):
    pass


@dataclass
class State:
    version: int
    task: str
    turns: int
    tokensUsed: int
    messages: list
    pendingToolUse: object


def _is_int(v):
    return type(v) is int


def load_checkpoint(directory):
    path = Path(directory) / "checkpoint.json"
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"no checkpoint at {path}") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(f"{path} cannot be read as JSON: {exc}") from exc
    match data:
        case {"version": v} if not (_is_int(v) and v == 1):
            raise UnsupportedVersion(f"{path} is version {v!r}")
        case {"version": _, "task": str(), "turns": t, "tokensUsed": k, "messages": [dict(), *_] as msgs,
              "pendingToolUse": None | {"id": str(), "name": str(), "input": _} as p} \
                if _is_int(t) and _is_int(k) and all(isinstance(m, dict) for m in msgs):
            state = State(**{f: data[f] for f in State.__dataclass_fields__})
        case dict():
            raise CheckpointError(f"{path} lacks a field or has one of the wrong type")
        case _:
            raise CheckpointError(f"{path} is not a JSON object")
    last = state.messages[-1]
    calls = [b for b in last.get("content") or [] if isinstance(b, dict) and b.get("type") == "tool_use"] \
        if last.get("role") == "assistant" and isinstance(last.get("content"), list) else []
    if state.pendingToolUse is not None and (not calls or calls[0]["id"] != state.pendingToolUse["id"]):
        raise CheckpointError(f"{path}: pendingToolUse is not the last message's tool_use")
    if state.pendingToolUse is None and calls:
        raise CheckpointError(f"{path}: the last message asks for a tool, but nothing is pending")
    return state


def save_checkpoint(state, directory):
    path = os.path.join(directory, "checkpoint.json")
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, json.dumps(asdict(state)).encode("utf-8"))
        os.fdatasync(fd)
    finally:
        os.close(fd)
    os.replace(path + ".tmp", path)
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def spend(response):
    usage = response.get("usage") or {}
    return sum(usage.get(k) or 0 for k in ("input_tokens", "output_tokens",
                                            "cache_creation_input_tokens", "cache_read_input_tokens"))


def _answer(state, call_id, result, directory, error=False):
    block = {"type": "tool_result", "tool_use_id": call_id, "content": result}
    if error:
        block["is_error"] = True
    state.messages.append({"role": "user", "content": [block]})
    state.turns += 1
    state.pendingToolUse = None
    save_checkpoint(state, directory)


def resume_agent(tools, call_model, execute_tool, directory="checkpoints"):
    state = load_checkpoint(directory)
    if state.pendingToolUse is not None:
        _answer(state, state.pendingToolUse["id"], "interrupted: this call was cut off by a crash and its outcome "
                "is unknown; check before running it again", directory, error=True)
    elif state.messages[-1]["role"] == "assistant":
        return asdict(state)
    while state.turns < MAX_TURNS:
        response = call_model(tools=tools, messages=state.messages)
        state.tokensUsed += spend(response)
        state.messages.append({"role": "assistant", "content": response["content"]})
        if response["stop_reason"] != "tool_use":
            break
        block = next(b for b in response["content"] if b["type"] == "tool_use")
        state.pendingToolUse = {"id": block["id"], "name": block["name"], "input": block["input"]}
        save_checkpoint(state, directory)
        _answer(state, block["id"], execute_tool(block["name"], block["input"]), directory)
    save_checkpoint(state, directory)
    return asdict(state)
