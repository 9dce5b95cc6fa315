"""VERDICT: fail PARSE,TRACE

The starter's two failures in a class: writes in place, and saves only once the result is recorded.
"""
import json
import os


class CheckpointingAgent:
    def __init__(self, directory):
        self.directory = directory

    def save(self, state):
        os.makedirs(self.directory, exist_ok=True)
        with open(os.path.join(self.directory, "checkpoint.json"), "w", encoding="utf-8") as f:
            json.dump(state, f)

    @staticmethod
    def spend(response):
        usage = response.get("usage") or {}
        return sum(usage.get(k) or 0 for k in ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                                                "cache_read_input_tokens"))

    def run(self, task, tools, call_model, execute_tool):
        state = {"version": 1, "task": task, "turns": 0, "tokensUsed": 0,
                 "messages": [{"role": "user", "content": task}], "pendingToolUse": None}
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += self.spend(response)
        while response["stop_reason"] == "tool_use":
            state["messages"].append({"role": "assistant", "content": response["content"]})
            block = next(b for b in response["content"] if b["type"] == "tool_use")
            result = execute_tool(block["name"], block["input"])
            state["messages"].append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": block["id"], "content": result}]})
            state["turns"] += 1
            self.save(state)
            response = call_model(tools=tools, messages=state["messages"])
            state["tokensUsed"] += self.spend(response)
        state["messages"].append({"role": "assistant", "content": response["content"]})
        self.save(state)
        return state


def save_checkpoint(state, directory="checkpoints"):
    CheckpointingAgent(directory).save(state)


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    return CheckpointingAgent(directory).run(task, tools, call_model, execute_tool)
