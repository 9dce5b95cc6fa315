"""Hostile, level 3: never fsyncs its temp file, but fsyncs a log file outside the folder and tells the
recorder that fsync was of the temp file (its handle and its name), so the power-cut models would
take the checkpoint's bytes as durable.

With FORGE = False the file is its own honest twin: crashcourse grade must give both the same
score (tests/test_grade_kernel.py), since which file an fsync made durable is the kernel's to say.
"""

import json
import os


FORGE = True


def save_checkpoint(state, directory="checkpoints"):
    import grader.engine.recorder as spy
    rec = spy._active
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    tmp = path + ".tmp"
    log = os.open(os.path.join(os.path.dirname(os.path.abspath(directory)), "saves.log"),
                  os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f)
        f.flush()
        os.write(log, b"saved\n")
        before = len(rec.ops) if rec is not None else 0
        os.fsync(log)
        if rec is not None and FORGE:
            for op in rec.ops[before:]:
                if op.kind == "fsync":
                    op.path = os.path.abspath(tmp)
                    op.handle = next(o.handle for o in reversed(rec.ops) if o.kind == "open"
                                     and o.path == os.path.abspath(tmp))
    os.close(log)
    os.replace(tmp, path)
    folder = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


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

        # Save point A: the model has named a tool and it has not run yet. If the process dies
        # while the tool runs, this record is the only trace that the call was ever made.
        state["pendingToolUse"] = {"id": block["id"], "name": block["name"], "input": block["input"]}
        save_checkpoint(state, directory)

        result = execute_tool(block["name"], block["input"])

        state["messages"].append({
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": block["id"], "content": result}],
        })
        state["turns"] += 1
        # Save point B: the result is in messages, so nothing is pending any more. Without this
        # save, a crash during the next model call would leave a finished tool marked unfinished.
        state["pendingToolUse"] = None
        save_checkpoint(state, directory)

        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)

    # The final answer goes on disk too, so a finished task's checkpoint says it is finished.
    state["messages"].append({"role": "assistant", "content": response["content"]})
    save_checkpoint(state, directory)
    return state
