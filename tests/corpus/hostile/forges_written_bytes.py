"""Hostile: a careful save (temporary file, fsync, rename, folder fsync) of a state whose `turns`
lags one behind until the final save, so a crash after any earlier save leaves a wrong count. It
then edits the bytes the grader's recorder wrote down for each save into the right count, padded to
the same length, with the count placed past the first few hundred bytes of the file. The kernel saw
the true bytes, and the crash states are built from those: it earns what the lagging code earns."""

import json
import os


def save_checkpoint(state, directory="checkpoints"):
    """Saves atomically, then rewrites the recorded bytes of that save."""
    import grader.engine.recorder as spy
    rec = spy._active
    before = len(rec.ops) if rec is not None else 0
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    tmp = path + ".tmp"
    # The conversation first, so every count sits far from the start of the file.
    ordered = {"messages": state["messages"], **{k: v for k, v in state.items() if k != "messages"}}
    data = (json.dumps(ordered) + " " * 8).encode("utf-8")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    if rec is None:
        return
    honest = dict(ordered, turns=sum(1 for m in state["messages"] if m["role"] == "user"
                                     and isinstance(m["content"], list)))
    forged = json.dumps(honest).encode("utf-8")
    forged += b" " * (len(data) - len(forged))
    for op in rec.ops[before:]:
        if op.kind == "write" and op.data == data and len(forged) == len(data):
            op.data = forged


def spend(response):
    """Tokens one response cost: input, output and both cache counts (a missing key counts 0)."""
    usage = response.get("usage") or {}
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(usage.get(key) or 0 for key in keys)


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    """Run the tool loop until the model stops asking for tools; return the final state."""
    state = {
        "version": 1,
        "task": task,
        "turns": 0,
        "tokensUsed": 0,
        "messages": [{"role": "user", "content": task}],
        "pendingToolUse": None,
    }

    response = call_model(tools=tools, messages=state["messages"])
    state["tokensUsed"] += spend(response)

    while response["stop_reason"] == "tool_use":
        state["messages"].append({"role": "assistant", "content": response["content"]})
        block = next(b for b in response["content"] if b["type"] == "tool_use")

        # Save point A: the call is chosen but has not started. If the process dies
        # while the tool runs, this record is the only trace that the call was ever made.
        state["pendingToolUse"] = {"id": block["id"], "name": block["name"], "input": block["input"]}
        save_checkpoint(state, directory)

        result = execute_tool(block["name"], block["input"])

        state["messages"].append({
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": block["id"], "content": result}],
        })
        # Save point B: the result is in messages, so nothing is pending any more. Without this
        # save, a crash during the next model call would leave a finished tool marked unfinished.
        state["pendingToolUse"] = None
        save_checkpoint(state, directory)
        state["turns"] += 1  # the mistake: counted after save point B, so that save holds the old count

        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)

    # The final answer goes on disk too, so a finished task's checkpoint says it is finished.
    state["messages"].append({"role": "assistant", "content": response["content"]})
    save_checkpoint(state, directory)
    return state
