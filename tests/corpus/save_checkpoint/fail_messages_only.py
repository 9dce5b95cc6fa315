"""VERDICT: fail FIELDS

Atomic, but it saves only the conversation: task, turns, tokensUsed and pendingToolUse are lost.
"""

import json
import os


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"messages": state["messages"]}, f)
    os.replace(path + ".tmp", path)
