"""Level 4, wrong in one place: resume's saves write checkpoint.json in place, through libc's write().

Everything else is the solution's. The save opens checkpoint.json with O_TRUNC and hands the bytes to
libc through ctypes, past every patch in Python: a learner's own pytest cannot see the write, so it
cannot work out what a second crash during the resume would leave, and says so (SAVED); grade reads
the kernel's account and finds the empty file such a crash leaves (SAVED). 7 of 10 on both faces.
"""

import json
import os

MAX_TURNS = 20  # the most tool turns one task may take, counted over the whole task, crashes included

FIELDS = ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")
TYPES = {"version": int, "task": str, "turns": int, "tokensUsed": int, "messages": list,
         "pendingToolUse": (dict, type(None))}


class CheckpointError(Exception):
    """A checkpoint that resume cannot trust: missing, torn, malformed, or from an unknown version."""


class UnsupportedVersion(CheckpointError):
    """A checkpoint written in a format this code does not know."""


import ctypes
_libc = ctypes.CDLL(None)


def save_checkpoint(state, directory="checkpoints"):
    path = os.path.join(directory, "checkpoint.json")
    data = json.dumps({key: state[key] for key in FIELDS}).encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _libc.write(fd, data, len(data))
    finally:
        os.close(fd)


def _tool_uses(message):
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"] if isinstance(content, list) else []


def load_checkpoint(directory="checkpoints"):
    """Read ``<directory>/checkpoint.json`` and refuse, with CheckpointError, anything resume cannot trust."""
    path = os.path.join(directory, "checkpoint.json")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        # Nothing to resume: the run died before its first save completed. Saying so lets the
        # caller start the task afresh, knowingly, instead of resuming from nothing.
        raise CheckpointError(f"there is no checkpoint at {path}: nothing to resume") from None
    except OSError as exc:
        raise CheckpointError(f"cannot read {path}: {exc}") from exc
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        # A torn or damaged file. Do not guess at what it held, and do not overwrite it: it is the
        # only record of the run, and a person may want to look at it.
        raise CheckpointError(f"{path} is not one complete JSON document ({len(raw)} bytes): {exc}") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} holds a JSON {type(data).__name__}, not a checkpoint object")
    # The version first, before any other field is read: a future format may have moved them.
    version = data.get("version")
    if type(version) is not int or version != 1:
        raise UnsupportedVersion(f"{path} has version {version!r}; this resume reads version 1 only")
    missing = [key for key in FIELDS if key not in data]
    if missing:
        raise CheckpointError(f"{path} is missing {', '.join(missing)}")
    for key, kind in TYPES.items():
        if not isinstance(data[key], kind) or isinstance(data[key], bool):
            raise CheckpointError(f"{path}: `{key}` is {json.dumps(data[key])[:40]}, of the wrong type")
    messages = data["messages"]
    if not messages or not all(isinstance(m, dict) for m in messages):
        raise CheckpointError(f"{path}: `messages` is empty or holds something that is not a message")
    # pendingToolUse must be the call the transcript ends with; otherwise reconciling it would
    # answer the wrong call, or answer one twice.
    pending = data["pendingToolUse"]
    last_calls = _tool_uses(messages[-1]) if messages[-1].get("role") == "assistant" else []
    if pending is not None:
        if not last_calls or {k: last_calls[0].get(k) for k in ("id", "name", "input")} != pending:
            raise CheckpointError(f"{path}: pendingToolUse does not match the last tool_use in messages")
    elif last_calls:
        raise CheckpointError(f"{path}: the last message asks for a tool but nothing is pending")
    return {key: data[key] for key in FIELDS}


def spend(response):
    """Tokens one response cost: input, output and both cache counts (a missing key counts 0)."""
    usage = response.get("usage") or {}
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(usage.get(key) or 0 for key in keys)


def _record_result(state, call, result, directory):
    state["messages"].append({
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": result}],
    })
    state["turns"] += 1
    state["pendingToolUse"] = None
    save_checkpoint(state, directory)  # save point B


def resume_agent(tools, call_model, execute_tool, directory="checkpoints"):
    """Carry the task in ``<directory>/checkpoint.json`` on to its end; return the final state."""
    # The counters come from the file: turns keeps the cap honest across the crash, tokensUsed
    # keeps a spend budget and the cost report in step with what was really spent.
    state = load_checkpoint(directory)

    pending = state["pendingToolUse"]
    if pending is not None:
        # The crash came between save A and save B: the tool may not have started, may have
        # finished, or may have stopped halfway; the file cannot say which. Run it again under its
        # id as the idempotency key, so a tool that already did it returns the first result instead
        # of acting twice. Until it is answered, the API would refuse the transcript (a 400).
        result = execute_tool(pending["name"], pending["input"], tool_use_id=pending["id"])
        # The at-most-once policy would instead record, without running anything:
        #   {"type": "tool_result", "tool_use_id": pending["id"], "is_error": True,
        #    "content": "interrupted: the process stopped while this ran; its outcome is unknown"}
        # and let the model decide what to check or retry.
        _record_result(state, pending, result, directory)

    last = state["messages"][-1]
    if last["role"] == "assistant":
        return state  # the final answer is already saved: the task had finished

    while state["turns"] < MAX_TURNS:
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)
        state["messages"].append({"role": "assistant", "content": response["content"]})
        if response["stop_reason"] != "tool_use":
            break
        block = next(b for b in response["content"] if b["type"] == "tool_use")
        call = {"id": block["id"], "name": block["name"], "input": block["input"]}
        state["pendingToolUse"] = call
        save_checkpoint(state, directory)  # save point A: a crash from here on leaves a trace of the call
        result = execute_tool(call["name"], call["input"], tool_use_id=call["id"])
        _record_result(state, call, result, directory)

    # Either the model answered (save that answer), or the cap was reached, in which case the
    # state was saved at B and saving again changes nothing.
    save_checkpoint(state, directory)
    return state
