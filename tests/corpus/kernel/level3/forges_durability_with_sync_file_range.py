"""Hostile, level 3: in place of each fsync (the temp file, the folder), calls sync_file_range (through
ctypes) with every flag: it starts and waits for the writeback of the file's pages, but makes neither
its size nor its name nor the drive's cache durable. A judge that took any sync for fsync would give it
the durability checks. With FORGE = False it calls nothing there: both earn the same.
"""

import json
import os
import warnings
import ctypes
import ctypes.util

FORGE = True
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _flush_range(fd):
    """sync_file_range(fd, 0, 0, WAIT_BEFORE | WRITE | WAIT_AFTER): not what fsync does."""
    if _libc.sync_file_range(fd, ctypes.c_int64(0), ctypes.c_int64(0), 7) != 0:
        raise OSError(ctypes.get_errno(), "sync_file_range")


def _fsync_directory(directory):
    """Make the entries of ``directory`` (a new name, a rename) durable, where the platform allows it."""
    try:
        # A directory is opened read-only: that is enough to fsync it, and writing to one is refused.
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        # Windows will not open a folder this way (PermissionError). There the standard library
        # offers no way to flush a folder, so the rename is as durable as the file system makes
        # it. Say so rather than pretend; the warning shows once per run.
        warnings.warn(f"cannot open the folder {directory!r} to fsync it on this platform; a power cut "
                      "may still undo the last rename", RuntimeWarning, stacklevel=3)
        return
    try:
        # Outside the `try` above on purpose: if fsync itself fails, the disk did not take the
        # entry, and the caller must hear about it. (A failed fsync retried later may report
        # success although the data is gone. PostgreSQL found this in 2018; its fix, stopping
        # instead of retrying, shipped in February 2019 in 11.2 and the other minor releases.)
        if FORGE:
            _flush_range(fd)
    finally:
        os.close(fd)


def _make_directory(directory):
    """Create ``directory`` (and missing parents) so that a power cut cannot take it back."""
    directory = os.path.abspath(directory)
    if os.path.isdir(directory):
        return
    parent = os.path.dirname(directory)
    _make_directory(parent)
    try:
        os.mkdir(directory)
    except FileExistsError:
        pass  # someone else made it between the check and here; it still needs its parent synced
    # A new folder is an entry in its parent, no different from a new file: until the parent is
    # fsynced, a power cut can lose the folder and every checkpoint inside it.
    _fsync_directory(parent)


def save_checkpoint(state, directory="checkpoints"):
    """Write the six protocol fields of ``state`` to ``<directory>/checkpoint.json``: all or nothing, and durable."""
    _make_directory(directory)
    path = os.path.join(directory, "checkpoint.json")
    tmp = path + ".tmp"  # beside the real file, so the rename stays within one file system
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f)
        # 1. flush: json.dump filled Python's buffer; flush hands those bytes to the OS. fsync
        #    only sees what the OS has, so without this it would sync a file still missing its tail.
        f.flush()
        # 2. fsync before the rename: the OS may write the rename to disk before the data. Then a
        #    power cut leaves checkpoint.json under its name with zero bytes (ext4, 2009).
        #    On Linux fsync returns once the device has the data. On macOS it stops at the drive,
        #    whose own cache can still lose it; fcntl.fcntl(fd, fcntl.F_FULLFSYNC) asks the drive
        #    to flush too. The grader follows Linux, so this solution calls os.fsync alone.
        if FORGE:
            _flush_range(f.fileno())
    os.replace(tmp, path)
    # 3. fsync the directory after the rename: the rename changed the directory, not the file.
    #    Until the directory is on disk, a power cut can bring the previous checkpoint back, and
    #    save_checkpoint would have returned for a save that is then undone.
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
