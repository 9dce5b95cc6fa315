"""Hostile corpus, the honest twin of truncates_after_exchanging_folders: each save writes a whole new folder
beside the checkpoint folder, trades the two in one step (renameat2 RENAME_EXCHANGE), then removes the old one."""
import ctypes
import json
import os

_libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2


def save_checkpoint(state, directory="checkpoints"):
    folder = os.path.abspath(directory)
    new = folder + ".new"
    os.makedirs(new, exist_ok=True)
    with open(os.path.join(new, "checkpoint.json"), "w", encoding="utf-8") as f:
        json.dump(state, f)
    if not os.path.isdir(folder):
        os.rename(new, folder)
        return
    if _libc.renameat2(AT_FDCWD, os.fsencode(new), AT_FDCWD, os.fsencode(folder), RENAME_EXCHANGE) != 0:
        raise OSError(ctypes.get_errno(), "renameat2", new)
    for name in os.listdir(new):
        os.unlink(os.path.join(new, name))
    os.rmdir(new)


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
