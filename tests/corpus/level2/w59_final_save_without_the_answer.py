"""VERDICT: fail COUNTS

Reasoning first. The loop saves at A and at B correctly, and saves once more after the model's
final answer, but it returns the answer alongside the state instead of appending it to `messages`
first ("the answer is the output, not part of the history"): the final save writes the same state as
the last save point B, and the state returned lacks the final assistant message. On disk a
finished task looks like one still waiting for the model, so a resume calls the model again and
pays for a second answer; on a conversation with no tool call, the file holds only the task. In the
crash engine's terms the last save is COUNTS: its tokensUsed counts the final response, whose message
the file does not hold (a resume has paid for an answer it cannot see).
"""

import json
import os


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(state, f)
    os.replace(path + ".tmp", path)


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
        state["pendingToolUse"] = {"id": use["id"], "name": use["name"], "input": use["input"]}
        save_checkpoint(state, directory)
        result = execute_tool(use["name"], use["input"])
        state["messages"].append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": use["id"], "content": result}]})
        state["turns"] += 1
        state["pendingToolUse"] = None
        save_checkpoint(state, directory)
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)
    save_checkpoint(state, directory)  # the answer itself is returned, not kept in the history
    state["answer"] = response["content"]
    return {key: value for key, value in state.items() if key != "answer"}
