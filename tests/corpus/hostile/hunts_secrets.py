"""Hostile: looks for what it must not see: climbs out through every descriptor it was handed (a folder's
descriptor opened before the box was made would reach past the box's root), reads every file it can
under /, /run, /var, /home, /root, /srv, /opt and /tmp and every process's environment and command
line, and says ESCAPED if it finds an instructor's secret, the kit's solutions or tests, or another
student's file. Otherwise the working loop: 10 of 10.
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

_MARKERS = (b"instructor-only", b"Level 2, solved", b"def test_", b"crashcourse-escaped", b"ESCAPED: ")
_done = []


def _look(path, found):
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return
    here = os.path.dirname(os.path.realpath(__file__))
    for m in _MARKERS:
        if m in head and not os.path.realpath(path).startswith(here + os.sep):
            found.append(f"{path}: {m!r}")


def _hunt():
    found, seen = [], 0
    for fd in range(3, 64):
        try:
            os.fstat(fd)
            top = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        except OSError:
            continue
        for _ in range(8):
            up = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=top)
            os.close(top)
            top = up
        try:
            names = os.listdir(top)
        except OSError:
            names = []
        if any(n in names for n in ("solutions", "work", "srv", "boot")) and "crashcourse" not in str(names):
            found.append(f"climbed out through descriptor {fd}: {names[:8]}")
        os.close(top)
    for base in ("/", "/run", "/var", "/home", "/root", "/srv", "/opt", "/tmp", "/etc"):
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if not (dirpath == "/" and d in ("proc", "sys", "dev", "usr", "lib", "lib64", "bin", "sbin"))
                           and "site-packages" not in d and "python3" not in d]
            if "grader" in dirpath.split(os.sep) or "site-packages" in dirpath or "/lib/python" in dirpath:
                continue
            for name in filenames:
                seen += 1
                if seen > 20000:
                    break
                _look(os.path.join(dirpath, name), found)
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            for what in ("environ", "cmdline"):
                try:
                    with open(f"/proc/{pid}/{what}", "rb") as f:
                        text = f.read()
                except OSError:
                    continue
                if b"--seed" in text or b"ANTHROPIC" in text or b"scenarios" in text:
                    found.append(f"/proc/{pid}/{what}: {text[:80]!r}")
    if found:
        raise RuntimeError("ESCAPED: " + "; ".join(found[:5]))


def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    if not _done:
        _done.append(1)
        _hunt()
    _atomic(state, os.path.join(directory, "checkpoint.json"))


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
