"""Right: a small CURRENT file names the generation in force; each generation is one snapshot file and
one journal, both numbered (the layout of LevelDB's CURRENT and MANIFEST, in miniature).

Reasoning first. A generation's snapshot is written whole and closed before CURRENT (replaced
through a temp file and os.replace) names it, so the loader never opens a snapshot that a kill cut
short: CURRENT names the previous generation until the rename. Journal lines are appended one write
each, each line the delta of one save; the loader applies the complete lines only (a cut last line is
a save that never finished). A new run numbers its generations past every snapshot file in the
folder, so it never appends to an old journal. Compaction follows the doubling rule (a new snapshot
when the journal outweighs the last one), so the bytes stay linear. Old files are removed only after
CURRENT has moved on.
"""

import json
import os
import re

FIELDS = ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")
NUMBERED = re.compile(r"^snapshot-(\d+)\.json$")


class Store:
    def __init__(self, directory):
        self.directory = directory
        self.generation = None
        self.snapshot_bytes = self.journal_bytes = self.saved = 0

    def path(self, name):
        return os.path.join(self.directory, name)

    def save(self, state):
        record = {k: state[k] for k in FIELDS}
        if self.generation is None or self.journal_bytes > self.snapshot_bytes or len(record["messages"]) < self.saved:
            self.snapshot(record)
        else:
            self.append(record)
        self.saved = len(record["messages"])

    def snapshot(self, record):
        os.makedirs(self.directory, exist_ok=True)
        taken = [int(m.group(1)) for m in map(NUMBERED.match, os.listdir(self.directory)) if m]
        old, self.generation = self.generation, max(taken, default=0) + 1
        data = json.dumps(record, ensure_ascii=False).encode("utf-8")
        with open(self.path(f"snapshot-{self.generation}.json"), "wb") as f:
            f.write(data)
        with open(self.path("CURRENT.tmp"), "w", encoding="ascii") as f:
            f.write(str(self.generation))
        os.replace(self.path("CURRENT.tmp"), self.path("CURRENT"))  # the commit point
        if old is not None:
            for name in (f"snapshot-{old}.json", f"journal-{old}.jsonl"):
                if os.path.exists(self.path(name)):
                    os.remove(self.path(name))
        self.snapshot_bytes, self.journal_bytes = len(data), 0

    def append(self, record):
        line = {"from": self.saved, "messages": record["messages"][self.saved:], "turns": record["turns"],
                "tokensUsed": record["tokensUsed"], "pendingToolUse": record["pendingToolUse"]}
        data = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
        with open(self.path(f"journal-{self.generation}.jsonl"), "ab") as f:
            f.write(data)
        self.journal_bytes += len(data)


_stores = {}


def save_checkpoint(state, directory="checkpoints"):
    _stores.setdefault(os.path.abspath(directory), Store(directory)).save(state)


def load_checkpoint(directory="checkpoints"):
    try:
        with open(os.path.join(directory, "CURRENT"), encoding="ascii") as f:
            generation = int(f.read())
    except FileNotFoundError:
        return None
    with open(os.path.join(directory, f"snapshot-{generation}.json"), encoding="utf-8") as f:
        state = json.load(f)
    try:
        with open(os.path.join(directory, f"journal-{generation}.jsonl"), "rb") as f:
            complete = f.read().split(b"\n")[:-1]
    except FileNotFoundError:
        complete = []
    for raw in complete:
        line = json.loads(raw)
        if line["from"] != len(state["messages"]):
            raise ValueError("a journal line does not follow the state before it")
        state["messages"].extend(line["messages"])
        state.update({k: line[k] for k in ("turns", "tokensUsed", "pendingToolUse")})
    return state


def _spend(response):
    usage = response.get("usage") or {}
    return sum(usage.get(k) or 0 for k in ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                                            "cache_read_input_tokens"))


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    store = Store(directory)  # a run of its own: its first save starts a new generation
    state = {"version": 1, "task": task, "turns": 0, "tokensUsed": 0,
             "messages": [{"role": "user", "content": task}], "pendingToolUse": None}
    response = call_model(tools=tools, messages=state["messages"])
    state["tokensUsed"] += _spend(response)
    while response["stop_reason"] == "tool_use":
        state["messages"].append({"role": "assistant", "content": response["content"]})
        use = next(b for b in response["content"] if b["type"] == "tool_use")
        state["pendingToolUse"] = {"id": use["id"], "name": use["name"], "input": use["input"]}
        store.save(state)
        result = execute_tool(use["name"], use["input"])
        state["messages"].append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": use["id"], "content": result}]})
        state["turns"] += 1
        state["pendingToolUse"] = None
        store.save(state)
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += _spend(response)
    state["messages"].append({"role": "assistant", "content": response["content"]})
    store.save(state)
    return state
