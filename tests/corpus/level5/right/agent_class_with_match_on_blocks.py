"""Right: the loop is a class, and each response's blocks are sorted with a match statement.

Reasoning first. `run_agent` builds an Agent and runs it. A turn's tool_use blocks are collected by
matching on the block shape (text blocks are kept in the message but otherwise ignored); all of them
go into pendingToolUse before any runs (A). Calls run in reverse order (the protocol allows any order);
each result joins the turn's single results message, counts one turn, leaves the pending list, and
is saved (B) before the next call starts. The file is written with os.open/os.write to a temp file in
the folder and renamed with os.replace after the descriptor is closed. The final answer is saved.
"""

import json
import os


class Agent:
    def __init__(self, task, tools, call_model, execute_tool, directory):
        self.tools, self.call_model, self.execute_tool, self.directory = tools, call_model, execute_tool, directory
        self.state = {"version": 1, "task": task, "turns": 0, "tokensUsed": 0,
                      "messages": [{"role": "user", "content": task}], "pendingToolUse": None}

    def save(self):
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, "checkpoint.json")
        data = json.dumps(self.state).encode("utf-8")
        fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            while data:
                data = data[os.write(fd, data):]
        finally:
            os.close(fd)
        os.replace(path + ".tmp", path)

    def ask(self):
        response = self.call_model(tools=self.tools, messages=self.state["messages"])
        usage = response.get("usage") or {}
        self.state["tokensUsed"] += sum(usage.get(k) or 0 for k in (
            "input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
        self.state["messages"].append({"role": "assistant", "content": response["content"]})
        return response

    def calls_in(self, content):
        calls = []
        for block in content:
            match block:
                case {"type": "tool_use", "id": str(id_), "name": str(name), "input": args}:
                    calls.append({"id": id_, "name": name, "input": args})
                case _:
                    pass
        return calls

    def run(self):
        response = self.ask()
        while response["stop_reason"] == "tool_use":
            calls = self.calls_in(response["content"])
            self.state["pendingToolUse"] = list(calls)
            self.save()
            answers = None
            for call in reversed(calls):
                result = self.execute_tool(call["name"], call["input"])
                if answers is None:
                    answers = {"role": "user", "content": []}
                    self.state["messages"].append(answers)
                answers["content"].append({"type": "tool_result", "tool_use_id": call["id"], "content": result})
                self.state["turns"] += 1
                self.state["pendingToolUse"] = [c for c in self.state["pendingToolUse"] if c["id"] != call["id"]] or None
                self.save()
            response = self.ask()
        self.save()
        return self.state


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    return Agent(task, tools, call_model, execute_tool, directory).run()
