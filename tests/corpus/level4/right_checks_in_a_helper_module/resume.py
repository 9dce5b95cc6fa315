"""Right: at-most-once, with the file handling in a helper module of the learner's own (store.py).

Reasoning first. `CheckpointError` is defined in store.py and imported here, so resume.CheckpointError
is the class store.read raises (the contract asks for the name in resume.py; an imported class is
the same class under that name). read() refuses a missing file, bytes that are not UTF-8, a torn or
non-object file, any version but the int 1, and fields of the wrong type (bool is not an int:
`type(...) is int`), touching nothing. A pending call is not run again: it is answered with an
is_error tool_result saying it was interrupted, turns goes up by one for that result, and the state
is saved (B) before the model is called. New calls are saved at A and B with the real tool_use id
as the key; the cap is read from this module's MAX_TURNS at each turn; a finished file is returned.
"""

import store
from store import CheckpointError, UnsupportedVersion  # noqa: F401 - part of this module's contract

MAX_TURNS = 20


def _spend(response):
    usage = response.get("usage") or {}
    return sum(usage.get(k) or 0 for k in ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                                            "cache_read_input_tokens"))


def _answer(state, call, content, directory, failed=False):
    block = {"type": "tool_result", "tool_use_id": call["id"], "content": content}
    if failed:
        block["is_error"] = True
    state["messages"].append({"role": "user", "content": [block]})
    state["turns"] += 1
    state["pendingToolUse"] = None
    store.write(state, directory)


def resume_agent(tools, call_model, execute_tool, directory="checkpoints"):
    state = store.read(directory)
    pending = state["pendingToolUse"]
    if pending is not None:
        # At most once: the call may have run, half run, or not run; say so rather than guess.
        _answer(state, pending, f"{pending['name']} was interrupted by a crash; whether it took effect is "
                                "unknown. Check before running it again.", directory, failed=True)
    elif state["messages"][-1]["role"] == "assistant":
        return state  # the final answer is on disk: the task had finished
    while state["turns"] < MAX_TURNS:
        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += _spend(response)
        state["messages"].append({"role": "assistant", "content": response["content"]})
        if response["stop_reason"] != "tool_use":
            break
        call = next({"id": b["id"], "name": b["name"], "input": b["input"]}
                    for b in response["content"] if b["type"] == "tool_use")
        state["pendingToolUse"] = call
        store.write(state, directory)
        _answer(state, call, execute_tool(call["name"], call["input"], tool_use_id=call["id"]), directory)
    store.write(state, directory)
    return state
