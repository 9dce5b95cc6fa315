"""Right: each journal line carries a CRC32 of its payload, so a torn or garbled line is recognised
by its checksum, not by where the newline fell. Snapshots are numbered files; the newest whole one
wins, and the journal named after it is replayed. Compaction when the journal outgrows the snapshot.
"""

import json
import os
import tempfile
import zlib

FIELDS = ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")


def _line(payload):
    body = json.dumps(payload, ensure_ascii=False)
    return f"{zlib.crc32(body.encode('utf-8')):08x} {body}\n".encode("utf-8")


class Saver:
    def __init__(self, directory):
        self.directory = directory
        self.generation = 0
        self.count = 0
        self.snapshot_size = 0
        self.journal_size = 0

    def save(self, state):
        fields = {k: state[k] for k in FIELDS}
        if self.generation == 0 or self.journal_size > self.snapshot_size:
            self._snapshot(fields)
        else:
            data = _line({"add": fields["messages"][self.count:],
                          "set": {k: fields[k] for k in ("turns", "tokensUsed", "pendingToolUse")}})
            with open(os.path.join(self.directory, f"journal.{self.generation}"), "ab") as f:
                f.write(data)
            self.journal_size += len(data)
        self.count = len(fields["messages"])

    def _snapshot(self, fields):
        os.makedirs(self.directory, exist_ok=True)
        if self.generation == 0:
            for name in os.listdir(self.directory):
                if name.startswith(("snapshot.", "journal.")):
                    os.remove(os.path.join(self.directory, name))
        self.generation += 1
        data = json.dumps(fields, ensure_ascii=False).encode("utf-8")
        with tempfile.NamedTemporaryFile("wb", dir=self.directory, delete=False, suffix=".tmp") as f:
            f.write(data)
        os.replace(f.name, os.path.join(self.directory, f"snapshot.{self.generation}"))
        for old in (f"snapshot.{self.generation - 1}", f"journal.{self.generation - 1}"):
            if os.path.exists(os.path.join(self.directory, old)):
                os.remove(os.path.join(self.directory, old))
        self.snapshot_size, self.journal_size = len(data), 0


def save_checkpoint(state, directory="checkpoints"):
    Saver(directory).save(state)


def load_checkpoint(directory="checkpoints"):
    if not os.path.isdir(directory):
        return None
    generations = sorted(int(n.split(".")[1]) for n in os.listdir(directory)
                         if n.startswith("snapshot.") and n.split(".")[1].isdigit())
    if not generations:
        return None
    g = generations[-1]
    with open(os.path.join(directory, f"snapshot.{g}"), encoding="utf-8") as f:
        state = json.load(f)
    journal = os.path.join(directory, f"journal.{g}")
    if os.path.exists(journal):
        with open(journal, "rb") as f:
            for raw in f.read().split(b"\n"):
                crc, _, body = raw.partition(b" ")
                if len(crc) != 8 or f"{zlib.crc32(body):08x}".encode() != crc:
                    break  # torn: this save never completed, and nothing after it did either
                rec = json.loads(body)
                state["messages"].extend(rec["add"])
                state.update(rec["set"])
    return state


def spend(response):
    usage = response.get("usage") or {}
    return sum(usage.get(k) or 0 for k in ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                                            "cache_read_input_tokens"))


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    saver = Saver(directory)
    state = {"version": 1, "task": task, "turns": 0, "tokensUsed": 0,
             "messages": [{"role": "user", "content": task}], "pendingToolUse": None}
    response = call_model(tools=tools, messages=state["messages"])
    state["tokensUsed"] += spend(response)
    while response["stop_reason"] == "tool_use":
        state["messages"].append({"role": "assistant", "content": response["content"]})
        block = next(b for b in response["content"] if b["type"] == "tool_use")
        state["pendingToolUse"] = {"id": block["id"], "name": block["name"], "input": block["input"]}
        saver.save(state)
        result = execute_tool(block["name"], block["input"])
        state["messages"].append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": block["id"], "content": result}]})
        state["turns"] += 1
        state["pendingToolUse"] = None
        saver.save(state)
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)
    state["messages"].append({"role": "assistant", "content": response["content"]})
    saver.save(state)
    return state
