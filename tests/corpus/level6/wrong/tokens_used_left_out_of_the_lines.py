"""Wrong: each journal line carries the new messages,
turns and pendingToolUse, but not tokensUsed ("it only matters for billing"). Reasoning first: the
loader rebuilds tokensUsed from the snapshot alone, so every save after a snapshot loads with the spend
the snapshot had: older than the messages it returns. The state is otherwise whole; the counters are
not (COUNTS), from the second save of the run on, in every crash state and at the end.
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
        # A fresh snapshot when there is none for this run yet, when the journal outweighs the
        # snapshot (the doubling rule keeps compaction's total cost linear), or if messages ever
        # shrank (the journal can only describe a history that grows at the end).
        if self.journal_name is None or self.journal_bytes > self.snapshot_bytes or len(messages) < self.messages_saved:
            self._write_snapshot(record)
        else:
            self._append(record)
        self.messages_saved = len(messages)

    def _append(self, record):
        line = {"from": self.messages_saved, "messages": record["messages"][self.messages_saved:],
                "turns": record["turns"], "pendingToolUse": record["pendingToolUse"]}
        data = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
        # Appending never touches the lines already there, so a crash can only cut the new line
        # short. The loader treats a last line without its newline as a save that never finished.
        with open(os.path.join(self.directory, self.journal_name), "ab") as f:
            f.write(data)
        self.journal_bytes += len(data)

    def _write_snapshot(self, record):
        os.makedirs(self.directory, exist_ok=True)
        old = self.journal_name
        # A new journal name for each snapshot: lines written after an older snapshot can never be
        # replayed on top of this one, even if the crash comes before the old journal is deleted.
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
        lines = f.read().split(b"\n")
    # Everything before the last newline is complete lines; what follows it is a line whose write
    # the crash cut short (or nothing). That save never completed, so it is left out.
    for raw in lines[:-1]:
        line = json.loads(raw)
        if line["from"] != len(state["messages"]):
            raise CheckpointError(f"{journal} does not follow its snapshot (a line starts at message "
                                  f"{line['from']}, the state has {len(state['messages'])})")
        state["messages"].extend(line["messages"])
        for key in ("turns", "pendingToolUse"):
            state[key] = line[key]
    return state


def spend(response):
    """Tokens one response cost: input, output and both cache counts (a missing key counts 0)."""
    usage = response.get("usage") or {}
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(usage.get(key) or 0 for key in keys)


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    """Run the tool loop until the model stops asking for tools; return the final state."""
    # One journal per run: its first save writes a snapshot, so a directory left by an earlier run
    # is never extended with this run's lines.
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

        # Save points A and B are where they were in level 2; only the cost of a save changed.
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
