"""Wrong: pathlib, a class, and sequence numbers instead of journal names.

Each save gets a number. The base holds the number of the save it contains; the journal's lines
carry theirs, and the loader skips any line not newer than the base, so emptying the journal after
a compaction may come late without harm. Compaction when the journal is twice the base.

Within one run that holds. But the numbers start again at 0 in every run: after a crash, the next
run's first base has a low number, and the crashed run's journal lines, numbered higher, are
replayed on top of it. (Held as right until the grader started a second run in the folder a crash
left; real kill-and-rerun runs agree.)

Expect: RERUN.
"""

import json
from pathlib import Path


class Store:
    def __init__(self, directory):
        self.dir = Path(directory)
        self.base = self.dir / "base.json"
        self.journal = self.dir / "journal.ndjson"
        self.seq = 0
        self.kept = None
        self.base_size = 0
        self.journal_size = 0

    def save(self, state):
        self.seq += 1
        fields = {k: state[k] for k in ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")}
        if self.kept is None or self.journal_size > 2 * self.base_size:
            self.dir.mkdir(parents=True, exist_ok=True)
            data = json.dumps({"seq": self.seq, "state": fields}).encode()
            tmp = self.dir / "base.json.new"
            tmp.write_bytes(data)
            tmp.replace(self.base)
            self.journal.write_bytes(b"")  # lines up to seq are in the base now
            self.base_size, self.journal_size = len(data), 0
        else:
            line = {"seq": self.seq, "new": fields["messages"][self.kept:],
                    "rest": {k: fields[k] for k in ("turns", "tokensUsed", "pendingToolUse")}}
            data = (json.dumps(line) + "\n").encode()
            with self.journal.open("ab") as f:
                f.write(data)
            self.journal_size += len(data)
        self.kept = len(fields["messages"])


def save_checkpoint(state, directory="checkpoints"):
    Store(directory).save(state)


def load_checkpoint(directory="checkpoints"):
    base = Path(directory) / "base.json"
    if not base.exists():
        return None
    top = json.loads(base.read_text())
    seq, state = top["seq"], top["state"]
    journal = Path(directory) / "journal.ndjson"
    if journal.exists():
        *complete, _ = journal.read_bytes().split(b"\n")
        for raw in complete:
            line = json.loads(raw)
            if line["seq"] <= seq:
                continue  # already inside the base
            if line["seq"] != seq + 1:
                break
            seq = line["seq"]
            state["messages"].extend(line["new"])
            state.update(line["rest"])
    return state


def spend(response):
    usage = response.get("usage") or {}
    return sum(usage.get(k) or 0 for k in ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                                            "cache_read_input_tokens"))


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    store = Store(directory)
    state = {"version": 1, "task": task, "turns": 0, "tokensUsed": 0,
             "messages": [{"role": "user", "content": task}], "pendingToolUse": None}
    response = call_model(tools=tools, messages=state["messages"])
    state["tokensUsed"] += spend(response)
    while response["stop_reason"] == "tool_use":
        state["messages"].append({"role": "assistant", "content": response["content"]})
        block = [b for b in response["content"] if b["type"] == "tool_use"][0]
        state["pendingToolUse"] = {"id": block["id"], "name": block["name"], "input": block["input"]}
        store.save(state)
        result = execute_tool(block["name"], block["input"])
        state["messages"].append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": block["id"], "content": result}]})
        state["turns"] += 1
        state["pendingToolUse"] = None
        store.save(state)
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)
    state["messages"].append({"role": "assistant", "content": response["content"]})
    store.save(state)
    return state
