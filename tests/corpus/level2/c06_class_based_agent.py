"""VERDICT: pass

A class holds the loop; the state carries a runtime-only clock that the save leaves out.
"""
import json
import os
import time

FIELDS = ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    target = os.path.join(directory, "checkpoint.json")
    with open(target + ".tmp", "wb") as f:
        f.write(json.dumps({k: state[k] for k in FIELDS}).encode())
    os.replace(target + ".tmp", target)


class Agent:
    USAGE = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")

    def __init__(self, tools, call_model, execute_tool, directory):
        self.tools, self.call_model, self.execute_tool, self.directory = tools, call_model, execute_tool, directory

    def ask(self, state):
        response = self.call_model(tools=self.tools, messages=state["messages"])
        usage = response.get("usage") or {}
        state["tokensUsed"] += sum(usage.get(k) or 0 for k in self.USAGE)
        return response

    def checkpoint(self, state):
        save_checkpoint(state, self.directory)

    def run(self, task):
        state = {"version": 1, "task": task, "turns": 0, "tokensUsed": 0,
                 "messages": [{"role": "user", "content": task}], "pendingToolUse": None,
                 "startedAt": time.time()}
        response = self.ask(state)
        while response["stop_reason"] == "tool_use":
            state["messages"].append({"role": "assistant", "content": response["content"]})
            call = [b for b in response["content"] if b["type"] == "tool_use"][0]
            state["pendingToolUse"] = {"id": call["id"], "name": call["name"], "input": call["input"]}
            self.checkpoint(state)
            output = self.execute_tool(call["name"], call["input"])
            state["messages"].append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call["id"], "content": output}]})
            state["turns"] += 1
            state["pendingToolUse"] = None
            self.checkpoint(state)
            response = self.ask(state)
        state["messages"].append({"role": "assistant", "content": response["content"]})
        self.checkpoint(state)
        return {k: state[k] for k in FIELDS}


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    return Agent(tools, call_model, execute_tool, directory).run(task)
