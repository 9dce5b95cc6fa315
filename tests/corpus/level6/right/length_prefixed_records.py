"""Right: the journal holds no lines but records, each a ten-digit length, a colon and the JSON; the
loader reads records while a whole one is there and stops at one cut short, so where a crash cuts a
write does not matter. Snapshot and compaction as in the lesson.
"""

import json
import os
import uuid

FIELDS = ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")
SNAPSHOT = "snapshot.json"


class CheckpointError(Exception):
    """The checkpoint directory holds something this loader cannot turn back into a state."""


class Journal:
    """Saves the states of one run into ``directory``; each save writes only what changed."""

    def __init__(self, directory):
        self.directory = directory
        self.journal_name = None   # None until the first save writes a snapshot for this run
        self.snapshot_bytes = 0
        self.journal_bytes = 0
        self.messages_saved = 0

    def save(self, state):
        record = {key: state[key] for key in FIELDS}
        messages = record["messages"]
        if self.journal_name is None or self.journal_bytes > self.snapshot_bytes or len(messages) < self.messages_saved:
            self._write_snapshot(record)
        else:
            self._append(record)
        self.messages_saved = len(messages)

    def _append(self, record):
        line = {"from": self.messages_saved, "messages": record["messages"][self.messages_saved:],
                "turns": record["turns"], "tokensUsed": record["tokensUsed"],
                "pendingToolUse": record["pendingToolUse"]}
        payload = json.dumps(line, ensure_ascii=False).encode("utf-8")
        data = b"%010d:" % len(payload) + payload
        with open(os.path.join(self.directory, self.journal_name), "ab") as f:
            f.write(data)
        self.journal_bytes += len(data)

    def _write_snapshot(self, record):
        os.makedirs(self.directory, exist_ok=True)
        old = self.journal_name
        self.journal_name = f"journal-{uuid.uuid4().hex}.jsonl"
        data = json.dumps({"journal": self.journal_name, "state": record}, ensure_ascii=False).encode("utf-8")
        path = os.path.join(self.directory, SNAPSHOT)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # the commit point: from here on the loader follows the new journal
        if old is not None and os.path.exists(os.path.join(self.directory, old)):
            os.remove(os.path.join(self.directory, old))  # only tidying: the snapshot no longer names it
        self.snapshot_bytes = len(data)
        self.journal_bytes = 0


_journals = {}


def save_checkpoint(state, directory="checkpoints"):
    """Save ``state`` into ``directory``, appending to this process's journal there."""
    key = os.path.abspath(directory)
    if key not in _journals:
        _journals[key] = Journal(directory)
    _journals[key].save(state)


def load_checkpoint(directory="checkpoints"):
    """The six fields as the last completed save left them, or None if no save has completed."""
    path = os.path.join(directory, SNAPSHOT)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        snapshot = json.load(f)  # whole or absent, never torn: it only ever arrives by rename
    if not isinstance(snapshot, dict) or set(snapshot) != {"journal", "state"}:
        raise CheckpointError(f"{path} is not a snapshot this loader wrote")
    state = snapshot["state"]
    journal = os.path.join(directory, snapshot["journal"])
    if not os.path.exists(journal):
        return state  # the crash came after the snapshot, before the first line of its journal
    with open(journal, "rb") as f:
        blob = f.read()
    records, at = [], 0
    while at + 11 <= len(blob):
        size = int(blob[at:at + 10])
        if blob[at + 10:at + 11] != b":" or at + 11 + size > len(blob):
            break  # a record cut short by a crash: the save it belonged to never completed
        records.append(blob[at + 11:at + 11 + size])
        at += 11 + size
    for raw in records:
        line = json.loads(raw)
        if line["from"] != len(state["messages"]):
            raise CheckpointError(f"{journal} does not follow its snapshot (a line starts at message "
                                  f"{line['from']}, the state has {len(state['messages'])})")
        state["messages"].extend(line["messages"])
        for key in ("turns", "tokensUsed", "pendingToolUse"):
            state[key] = line[key]
    return state


def spend(response):
    """Tokens one response cost: input, output and both cache counts (a missing key counts 0)."""
    usage = response.get("usage") or {}
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(usage.get(key) or 0 for key in keys)


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    """Run the tool loop until the model stops asking for tools; return the final state."""
    journal = Journal(directory)
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

        state["pendingToolUse"] = {"id": block["id"], "name": block["name"], "input": block["input"]}
        journal.save(state)

        result = execute_tool(block["name"], block["input"])

        state["messages"].append({
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": block["id"], "content": result}],
        })
        state["turns"] += 1
        state["pendingToolUse"] = None
        journal.save(state)

        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)

    state["messages"].append({"role": "assistant", "content": response["content"]})
    journal.save(state)
    return state
