"""The recorder against the kernel: what it records is what the system calls were.

A child process runs the level-2 loop (with several ways of saving) under ``strace`` while the
recorder records the same run. For the checkpoint directory, the two logs must match one to one,
in order: every recorded open for writing is one ``openat`` that may write, every recorded write is
one ``write``/``pwrite64``/``sendfile`` of the same length to the same file, every rename is one
``rename``, and so on for fsync, truncate, unlink, mkdir and close. A write the recorder put at the
wrong moment (while the bytes were still in Python's buffer) would show up here out of order.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
STRACE = shutil.which("strace")
pytestmark = [pytest.mark.strace,
              pytest.mark.skipif(STRACE is None, reason="strace is not installed on this machine")]

CALLS = ("openat,open,creat,write,pwrite64,writev,sendfile,copy_file_range,rename,renameat,renameat2,unlink,"
         "unlinkat,fsync,fdatasync,ftruncate,truncate,mkdir,mkdirat,close")
VARIANTS = ["solution", "pass_os_open_write_loop", "pass_mkstemp_fdopen", "pass_durable_fsync_file_and_dir",
            "pass_named_temporary_file", "fail_copy_instead_of_rename", "fail_remove_then_rename",
            "fail_rename_before_write_completes", "fail_r_plus_without_truncate", "fail_replace_inside_with"]

LINE = re.compile(r"^(?P<pid>\d+)\s+(?P<call>\w+)\((?P<args>.*)\)\s+=\s+(?P<ret>-?\d+)(?:<(?P<retpath>[^>]*)>)?")
FD_ARG = re.compile(r"(?:^|, )(\d+)<([^>]*)>")
STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
DIRFD_AND_PATH = re.compile(r'(?:AT_FDCWD|\d+)<([^>]*)>, "((?:[^"\\]|\\.)*)"')
WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND")


UNFINISHED = re.compile(r"^(\d+)\s+(.*) <unfinished \.\.\.>$")
RESUMED = re.compile(r"^(\d+)\s+<\.\.\. \w+ resumed>(.*)$")


def _whole_lines(lines):
    """strace's lines with a call split by another thread's (``<unfinished ...>``, then ``<... resumed>``)
    joined again: on a busy machine the loop's calls and a helper thread's interleave, and a half line
    read alone lost the open it began (its close was then taken for a writable file's)."""
    pending = {}
    for line in lines:
        line = line.rstrip("\n")
        cut = UNFINISHED.match(line)
        if cut:
            pending[cut[1]] = cut[2]
            continue
        rest = RESUMED.match(line)
        if rest:
            line = f"{rest[1]} {pending.pop(rest[1], '')}{rest[2]}"
        yield line


def syscalls(trace_file, workdir, folder):
    """The system calls on ``folder`` (or its files), as (kind, name, size) in order."""
    out = []
    fds = {}  # (pid, fd) -> (path when opened, opened for writing)

    def inside(path):
        return path == folder or os.path.dirname(path) == folder

    def name(path):
        return os.path.basename(path)

    with open(trace_file, encoding="utf-8", errors="replace") as f:
        for line in _whole_lines(f):
            m = LINE.match(line)
            if not m or int(m["ret"]) < 0:
                continue
            pid, call, args, ret = m["pid"], m["call"], m["args"], int(m["ret"])
            fd_args = FD_ARG.findall(args)
            if call in ("openat", "open", "creat"):
                path = m["retpath"] or ""
                writes = call == "creat" or any(flag in args for flag in WRITE_FLAGS)
                fds[(pid, str(ret))] = (path, writes)
                if writes and inside(path) and not os.path.isdir(path):
                    out.append(("open", name(path), 0))
            elif call in ("write", "pwrite64", "writev", "sendfile", "copy_file_range"):
                target = fd_args[1] if call == "copy_file_range" else fd_args[0]
                path = fds.get((pid, target[0]), (target[1], True))[0]
                if inside(path) and ret > 0:
                    out.append(("write", name(path), ret))
            elif call in ("fsync", "fdatasync", "ftruncate", "close"):
                fd, current = fd_args[0]
                path, writes = fds.get((pid, fd), (current, True))
                if call == "close":
                    fds.pop((pid, fd), None)
                    if writes and inside(path) and not os.path.isdir(path):
                        out.append(("close", name(path), 0))
                elif inside(path):
                    out.append(("fsync" if "sync" in call else "truncate", name(path), 0))
            elif call.startswith("rename"):
                pairs = DIRFD_AND_PATH.findall(args) if call != "rename" else [(workdir, s) for s in STRING.findall(args)]
                (d1, a), (d2, b) = pairs[:2]
                a, b = os.path.join(d1, a), os.path.join(d2, b)
                if inside(a) or inside(b):
                    out.append(("rename", f"{name(a)} -> {name(b)}", 0))
            elif call in ("unlink", "unlinkat", "mkdir", "mkdirat", "truncate"):
                pairs = DIRFD_AND_PATH.findall(args) if call.endswith("at") else [(workdir, STRING.findall(args)[0])]
                path = os.path.normpath(os.path.join(*pairs[0]))
                if inside(path):
                    out.append(({"unlinkat": "unlink", "mkdirat": "mkdir"}.get(call, call), name(path), 0))
    return out


def recorded(trace_json, folder):
    """The recorder's operations on ``folder`` (or its files), in the same shape."""
    with open(trace_json, encoding="utf-8") as f:
        ops = json.load(f)
    out = []
    for op in ops:
        path = op["path"]
        if op["kind"] not in ("open", "write", "fsync", "truncate", "rename", "unlink", "mkdir", "close") or not path:
            continue
        if not (path == folder or os.path.dirname(path) == folder or (op["dest"] and os.path.dirname(op["dest"]) == folder)):
            continue
        if op["kind"] == "rename":
            out.append(("rename", f"{os.path.basename(path)} -> {os.path.basename(op['dest'])}", 0))
        else:
            out.append((op["kind"], os.path.basename(path), op["size"] if op["kind"] == "write" else 0))
    return out


def run_under_strace(variant, base):
    workdir = os.path.join(base, variant)
    os.makedirs(workdir)
    log, ops = os.path.join(base, variant + ".strace"), os.path.join(base, variant + ".json")
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = os.path.join(base, "pycache")
    done = subprocess.run([STRACE, "-f", "-y", "-s", "0", "-e", "trace=" + CALLS, "-o", log,
                           sys.executable, "-S", os.path.join(HERE, "crash_child.py"), variant, workdir, "--trace", ops],
                          capture_output=True, text=True, timeout=120, env=env)
    if done.returncode != 0 and "PTRACE" in done.stderr + done.stdout:
        pytest.skip(f"strace cannot trace here: {done.stderr.strip()[:200]}")
    assert done.returncode == 0, done.stdout + done.stderr
    folder = os.path.join(workdir, "checkpoints")
    return recorded(ops, folder), syscalls(log, workdir, folder)


def test_recorded_operations_match_the_system_calls(tmp_path):
    base = os.path.realpath(tmp_path)
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = dict(zip(VARIANTS, pool.map(lambda v: run_under_strace(v, base), VARIANTS)))
    problems = []
    for variant, (ours, kernel) in results.items():
        if ours != kernel:
            first = next((i for i, (a, b) in enumerate(zip(ours, kernel)) if a != b), min(len(ours), len(kernel)))
            problems.append(f"{variant}: {len(ours)} recorded, {len(kernel)} system calls; first difference at "
                            f"#{first}: recorded {ours[first:first + 3]}, strace saw {kernel[first:first + 3]}")
        kinds = {kind for kind, _, _ in ours}
        if not {"open", "write", "close"} <= kinds:
            problems.append(f"{variant}: the trace should hold opens, writes and closes; it holds {sorted(kinds)}")
    assert not problems, "\n".join(problems)
    everything = [op for ours, _ in results.values() for op in ours]
    # The variants between them exercise every kind of operation the comparison covers.
    assert {k for k, _, _ in everything} >= {"open", "write", "fsync", "rename", "unlink", "mkdir", "close"}
    assert sum(1 for k, _, _ in everything if k == "write") > 50
