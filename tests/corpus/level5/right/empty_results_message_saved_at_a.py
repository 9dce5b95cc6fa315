"""Right, though it looks wrong: the user message that will hold the turn's results is appended, empty,
before save point A ("so every result has somewhere to go").

Reasoning first, and it changed the first guess. From save A until the first result, the file ends
with a user message holding no content after the assistant's tool_use blocks. pendingToolUse is
still exactly the calls of the last assistant message that have no result, so TRACE and PAIRING
hold. Would an empty user message be a 400? Only if it were sent, and it never is: the loop calls
the model after every result of the turn is in, and a resume must already handle a file that ends
in a partly filled results message (a crash after the first of three results leaves one in any
correct loop), by adding the missing results to that same message; here it finds it empty and fills
it the same way. No crash state loses or doubles a result, and the counts agree with the messages.
"""

import json
import os


def save_checkpoint(state, directory="checkpoints"):
    """Write the six protocol fields of ``state`` to ``<directory>/checkpoint.json``, all or nothing."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    # Same as level 2: a temp file beside the real one, closed before it takes the real name.
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f)
    os.replace(tmp, path)


def spend(response):
    """Tokens one response cost: input, output and both cache counts (a missing key counts 0)."""
    usage = response.get("usage") or {}
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(usage.get(key) or 0 for key in keys)


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    """Run the tool loop until the model stops asking for tools; return the final state."""
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
        blocks = [b for b in response["content"] if b["type"] == "tool_use"]

        # Save point A: every call the model named is pending before the first one runs. A crash
        # during the second call must still show the second and third as started-or-waiting, or
        # resume cannot tell which of them already posted, emailed or charged something.
        state["pendingToolUse"] = [{"id": b["id"], "name": b["name"], "input": b["input"]} for b in blocks]
        results_message = {"role": "user", "content": []}
        state["messages"].append(results_message)  # ready for this turn's results
        save_checkpoint(state, directory)

        # The API wants all of a turn's results in the one user message right after the assistant
        # message, so that message is created with the first result and grows with each later one.
        for block in blocks:
            result = execute_tool(block["name"], block["input"])

            results_message["content"].append({"type": "tool_result", "tool_use_id": block["id"], "content": result})
            state["turns"] += 1
            # The call leaves the pending list the moment its result is in messages: a call in both
            # places would be reconciled (perhaps run again) although its result is recorded.
            state["pendingToolUse"] = [p for p in state["pendingToolUse"] if p["id"] != block["id"]] or None
            # Save point B, once per result: a result that is back is on disk before the next tool
            # starts. Saving once at the end of the turn would lose it to a crash in a later tool.
            save_checkpoint(state, directory)

        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)

    state["messages"].append({"role": "assistant", "content": response["content"]})
    save_checkpoint(state, directory)
    return state
