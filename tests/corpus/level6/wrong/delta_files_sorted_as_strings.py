"""Wrong: the delta files' twin above, but the loader applies save-<n>.json in sorted(), string order:
save-10.json comes before save-9.json, so once ten saves follow one snapshot the messages are put
back in the wrong order. Right on a short task, wrong on a long one.
"""

import json
import os

FIELDS = ("version", "task", "turns", "tokensUsed", "messages", "pendingToolUse")


class CheckpointError(Exception):
    pass


def _write(path, data):
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)


class DeltaStore:
    """Each save is a file of its own, save-<n>.json, holding what changed; now and then a snapshot."""

    def __init__(self, directory):
        self.directory = directory
        self.n = 0
        self.saved = 0
        self.snapshot_bytes = 0
        self.delta_bytes = None

    def _last_number(self):
        """The highest save number a run before this one left in the folder (0 if none)."""
        numbers = [int(name[5:-5]) for name in os.listdir(self.directory)
                   if name.startswith("save-") and name.endswith(".json")]
        path = os.path.join(self.directory, "snapshot.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                numbers.append(json.load(f)["upto"])
        return max(numbers, default=0)

    def save(self, state):
        os.makedirs(self.directory, exist_ok=True)
        if self.delta_bytes is None:  # this run's first save: number on from what a crashed run left here
            self.n = self._last_number()
        self.n += 1
        record = {k: state[k] for k in FIELDS}
        if self.delta_bytes is None or self.delta_bytes > self.snapshot_bytes:
            data = json.dumps({"upto": self.n, "state": record}).encode()
            _write(os.path.join(self.directory, "snapshot.json"), data)
            self.snapshot_bytes, self.delta_bytes = len(data), 0
            for name in os.listdir(self.directory):
                if name.startswith("save-") and name.endswith(".json"):
                    os.remove(os.path.join(self.directory, name))
        else:
            delta = {"messages": record["messages"][self.saved:], "turns": record["turns"],
                     "tokensUsed": record["tokensUsed"], "pendingToolUse": record["pendingToolUse"]}
            data = json.dumps(delta).encode()
            _write(os.path.join(self.directory, f"save-{self.n}.json"), data)
            self.delta_bytes += len(data)
        self.saved = len(record["messages"])


def save_checkpoint(state, directory="checkpoints"):
    DeltaStore(directory).save(state)


def load_checkpoint(directory="checkpoints"):
    path = os.path.join(directory, "snapshot.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        snapshot = json.load(f)
    state = snapshot["state"]
    names = [name for name in os.listdir(directory) if name.startswith("save-") and name.endswith(".json")]
    for name in sorted(names):
        if int(name[5:-5]) <= snapshot["upto"]:
            continue
        with open(os.path.join(directory, name), encoding="utf-8") as f:
            delta = json.load(f)
        state["messages"].extend(delta["messages"])
        for key in ("turns", "tokensUsed", "pendingToolUse"):
            state[key] = delta[key]
    return state


def spend(response):
    """Tokens one response cost: input, output and both cache counts (a missing key counts 0)."""
    usage = response.get("usage") or {}
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(usage.get(key) or 0 for key in keys)


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    """Run the tool loop until the model stops asking for tools; return the final state."""
    journal = DeltaStore(directory)
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
