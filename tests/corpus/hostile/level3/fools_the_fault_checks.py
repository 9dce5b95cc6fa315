"""Hostile, level 3: durable under every power cut, but deaf to a failing fsync; it passes the fault
checks only where it can tell it is being tested.

- In the process that runs the checks (a learner's own pytest run), the checks replace ``os.fsync``:
  this file sees that (``os.fsync is not posix.fsync``) and raises as the check wants. Otherwise it
  calls the real fsync bound at import and swallows its error, which is the mistake.
- Where pytest runs beside it (the old fallback of ``crashcourse grade``, which ran these checks in
  the box), it also rewrites every report to "passed".

Under ``crashcourse grade`` the fault comes from the kernel and the verdict from the judge: it earns
9 of 10 (the failed-fsync check fails, as for any code that swallows EIO).
"""

import json
import os
import posix
import sys
import warnings

if "_pytest.reports" in sys.modules:  # a pytest run beside this code: every report says "passed"
    _reports = sys.modules["_pytest.reports"]
    _real_report = _reports.TestReport.from_item_and_call.__func__

    def _passed(cls, item, call):
        report = _real_report(cls, item, call)
        report.outcome, report.longrepr = "passed", None
        return report
    _reports.TestReport.from_item_and_call = classmethod(_passed)


def _fsync(fd):
    if os.fsync is not posix.fsync:
        os.fsync(fd)  # a check replaced fsync to make it fail: play along, and raise
        return
    try:
        posix.fsync(fd)
    except OSError:
        pass  # "best effort": the disk refused the data and nobody hears of it


def _fsync_directory(directory):
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        warnings.warn(f"cannot open the folder {directory!r} to fsync it here", RuntimeWarning, stacklevel=3)
        return
    try:
        _fsync(fd)
    finally:
        os.close(fd)


def _make_directory(directory):
    directory = os.path.abspath(directory)
    if os.path.isdir(directory):
        return
    parent = os.path.dirname(directory)
    _make_directory(parent)
    try:
        os.mkdir(directory)
    except FileExistsError:
        pass
    _fsync_directory(parent)


def save_checkpoint(state, directory="checkpoints"):
    _make_directory(directory)
    path = os.path.join(directory, "checkpoint.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f)
        f.flush()
        _fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_directory(directory)


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
        block = next(b for b in response["content"] if b["type"] == "tool_use")

        # Save point A: the call is chosen but has not started. If the process dies
        # while the tool runs, this record is the only trace that the call was ever made.
        state["pendingToolUse"] = {"id": block["id"], "name": block["name"], "input": block["input"]}
        save_checkpoint(state, directory)

        result = execute_tool(block["name"], block["input"])

        state["messages"].append({
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": block["id"], "content": result}],
        })
        state["turns"] += 1
        # Save point B: the result is in messages, so nothing is pending any more. Without this
        # save, a crash during the next model call would leave a finished tool marked unfinished.
        state["pendingToolUse"] = None
        save_checkpoint(state, directory)

        response = call_model(tools=tools, messages=state["messages"])
        state["tokensUsed"] += spend(response)

    # The final answer goes on disk too, so a finished task's checkpoint says it is finished.
    state["messages"].append({"role": "assistant", "content": response["content"]})
    save_checkpoint(state, directory)
    return state
