"""Hostile, level 3: durable under every power cut, but deaf to a failing fsync, unless it believes it
runs under the grader, in a worker after the first.

Under ``crashcourse grade`` the plain tests run in one worker, and each fault check's runs (without
the fault, then with it) in fresh ones; a learner's own pytest runs everything in one process. So
this file counts processes: at its first save into each folder it leaves a note in every place a
later worker might find it (its HOME, its own folder, the temp folder, the folder above the
checkpoints), and looks there for a note another process left (a process is a token kept in its
environment, which a fresh copy of the module shares). Finding one, it takes this run for one of
the grader's fault runs and lets a failed fsync raise; otherwise it swallows the error, which is
the mistake.

It deserves 9 of 10 (the failed-fsync check fails). Under its own pytest it gets 9: one process.
Under ``grade`` it gets 9: every worker starts with an empty HOME and temp folder and its folder as
handed in, and what a run of a check's steps left elsewhere is removed before the next, so no note
ever says a run came before. When notes outlived a worker, it earned 10 there.
"""

import json
import os
import tempfile
import warnings

_ME = os.environ.setdefault("RUN_TOKEN", os.urandom(8).hex())  # one per process, whatever imports it again
_BELIEVED = {}  # folder -> whether this process takes its run in that folder for the faulted one


def _places(directory):
    return (os.path.expanduser("~"), os.path.dirname(os.path.abspath(__file__)), tempfile.gettempdir(),
            os.path.dirname(os.path.abspath(directory)))


def _believes_faulted(directory):
    directory = os.path.abspath(directory)
    if directory not in _BELIEVED:
        seen = False
        for place in _places(directory):
            try:
                names = os.listdir(place)
            except OSError:
                continue
            seen = seen or any(n.startswith(".runs-") and n != f".runs-{_ME}" for n in names)
            try:
                open(os.path.join(place, f".runs-{_ME}"), "w").close()
            except OSError:
                pass
        _BELIEVED[directory] = seen
    return _BELIEVED[directory]


_FAULTED = [False]


def _fsync(fd):
    try:
        os.fsync(fd)
    except OSError:
        if _FAULTED[0]:
            raise  # "the grader's fault run": behave
        # "best effort": the disk refused the data and nobody hears of it


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
    _FAULTED[0] = _believes_faulted(directory)
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
