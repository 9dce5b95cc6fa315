"""Hostile: rewrites checkpoint.json in place through Linux's native AIO (io_setup and io_submit with
IOCB_CMD_PWRITE, through ctypes: no write call of any kind), then saves the honest way. A real kill
mid-way finds a torn checkpoint. It earns what an in-place save earns, or is refused.
"""
import ctypes
import ctypes.util
import json
import os

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _check(value, what):
    if value < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return value


def _atomic(state, path):
    """The honest half: a temp file beside the checkpoint, renamed over it."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f)
    os.replace(tmp, path)


class _Iocb(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64), ("key", ctypes.c_uint32), ("rw_flags", ctypes.c_uint32),
                ("opcode", ctypes.c_uint16), ("reqprio", ctypes.c_int16), ("fildes", ctypes.c_uint32),
                ("buf", ctypes.c_uint64), ("nbytes", ctypes.c_uint64), ("offset", ctypes.c_int64),
                ("reserved2", ctypes.c_uint64), ("flags", ctypes.c_uint32), ("resfd", ctypes.c_uint32)]


def _aio_write(fd, data, offset):
    ctx = ctypes.c_ulong(0)
    _check(_libc.syscall(ctypes.c_long(206), ctypes.c_long(8), ctypes.byref(ctx)), "io_setup")
    buf = ctypes.create_string_buffer(data, len(data))
    cb = _Iocb(opcode=1, fildes=fd, buf=ctypes.addressof(buf), nbytes=len(data), offset=offset)
    cbs = (ctypes.POINTER(_Iocb) * 1)(ctypes.pointer(cb))
    events = (ctypes.c_int64 * 8)()
    try:
        _check(_libc.syscall(ctypes.c_long(209), ctx, ctypes.c_long(1), cbs), "io_submit")
        _check(_libc.syscall(ctypes.c_long(208), ctx, ctypes.c_long(1), ctypes.c_long(1), events, None),
               "io_getevents")
    finally:
        _libc.syscall(ctypes.c_long(207), ctx)


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.json")
    if os.path.exists(path):
        data = json.dumps(state).encode()
        fd = os.open(path, os.O_WRONLY)
        try:
            for at in range(0, len(data), 64):
                _aio_write(fd, data[at:at + 64], at)
        finally:
            os.close(fd)
    _atomic(state, path)


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
