"""Under a kernel trace the box's worker replaces nothing the learner's code could compare
(grader.grading.worker): ``os``, ``io``, ``builtins`` and the code's own early-bound names stay the real
ones while a call is recorded, so code that saves well only while watched behaves as it does unwatched.
The kernel's account says what happened; the words a story uses (``os.replace`` or ``os.rename``,
whether a file was there before its open, the bytes shutil copied inside the kernel) come from audit
events, each kept only once its call is seen to have taken effect.

The whole path through ``crashcourse grade`` is held by the hostile corpus
(``saves_well_only_when_watched``, w43, and ``saves_well_on_any_sign_of_a_recorder``:
tests/test_grade_hostile.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from grader.engine.ops import Op
from grader.grading import kernel_trace
from grader.grading.kernel_trace import MISMATCH, label

# Run in a child of its own: an audit hook, once added, stays for the life of its process.
SCRIPT = textwrap.dedent("""
    import _io, builtins, io, json, os, posix, shutil, sys
    from os import replace as early_replace
    from grader.grading import worker
    from grader.engine.recorder import Recorder
    sys.addaudithook(worker._audit)
    folder = os.path.abspath("ck")
    os.makedirs(folder)

    def save(sync=os.fsync):
        seen = {
            "replace": os.replace is posix.replace, "fsync": os.fsync is posix.fsync, "open": os.open is posix.open,
            "write": os.write is posix.write, "builtin open": builtins.open is io.open is _io.open,
            "FileIO": io.FileIO is _io.FileIO, "early": early_replace is posix.replace, "default": sync is posix.fsync,
            "type": type(os.replace) is type(posix.replace),
        }
        p = os.path.join(folder, "checkpoint.json")
        with open(p + ".tmp", "w") as f:
            f.write("{}")
        os.replace(p + ".tmp", p)
        try:
            os.remove(p + ".missing")  # fails: no word
        except FileNotFoundError:
            pass
        try:
            os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL)  # fails: no word
        except FileExistsError:
            pass
        os.link(p, p + ".two")
        os.replace(p + ".two", p)  # two names of one file: succeeds, changes nothing
        os.unlink(p + ".two")
        shutil.copyfile(p, p + ".bak")
        os.rename(p + ".bak", p + ".old")
        with open(p + ".log", "a") as f:
            f.write("12345")
        with open(p + ".log", "a") as f:
            f.write("6")
        with open(p + ".o", "w", opener=lambda name, flags: os.open(name, flags, 0o600)) as f:
            f.write("x")
        fd = os.open(p, os.O_WRONLY)
        with open(f"/dev/fd/{fd}", "w") as f:
            f.write("{}")
        os.close(fd)
        return seen

    rec = Recorder(watch=[folder], patch=False)
    with rec:
        seen = save()
        worker.settle_words(final=True)
    ops = [[op.kind, op.api, op.path and os.path.basename(op.path), op.dest and os.path.basename(op.dest),
            sorted(op.flags), op.data.decode(), op.size] for op in rec.ops]
    print(json.dumps({"seen": seen, "ops": ops}))
""")


def test_a_recorded_call_in_the_box_sees_the_real_os_and_only_calls_that_took_effect_get_words(tmp_path):
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert all(got["seen"].values()), got["seen"]  # nothing the code could compare was replaced
    ops = [tuple(op[:4]) for op in got["ops"]]
    assert ops == [
        ("open", "open", "checkpoint.json.tmp", None),
        ("rename", "os.replace", "checkpoint.json.tmp", "checkpoint.json"),
        ("link", "os.link", "checkpoint.json", "checkpoint.json.two"),
        ("rename", "os.replace", "checkpoint.json.two", "checkpoint.json"),
        ("unlink", "os.unlink", "checkpoint.json.two", None),
        ("write", "os.sendfile", "checkpoint.json.bak", None),
        ("open", "open", "checkpoint.json.bak", None),
        ("rename", "os.rename", "checkpoint.json.bak", "checkpoint.json.old"),
        ("open", "open", "checkpoint.json.log", None),
        ("open", "open", "checkpoint.json.log", None),
        ("open", "open", "checkpoint.json.o", None),  # one word for open() and the os.open its opener made
        ("open", "os.open", "checkpoint.json", None),
        ("open", "open", "checkpoint.json", None),  # /dev/fd/N names the file it reopens
    ], got["ops"]
    copy = got["ops"][5]
    assert copy[5] == "{}", "the bytes shutil copied inside the kernel, read before the copy"
    first_log, second_log = got["ops"][8], got["ops"][9]
    assert "existed" not in first_log[4] and "existed" in second_log[4] and second_log[6] == 5, \
        "an appending file's size at its open: where its writes land"
    assert "existed" in got["ops"][11][4] and "existed" in got["ops"][12][4]


def _open(path, handle, flags=frozenset({"create", "trunc"})):
    return Op(0, "open", api="openat", path=path, handle=handle, flags=flags)


def test_a_copys_bytes_with_no_kernel_write_of_their_size_are_dropped_not_refused():
    ck = "/box/ck/checkpoint.json"
    kernel = [_open(ck, 7), Op(1, "write", api="write", path=ck, handle=7, offset=0, data=b"ab", size=2),
              Op(2, "write", api="write", path=ck, handle=7, offset=2, data=b"cd", size=2)]
    copy = Op(0, "write", api="os.sendfile", path=ck, data=b"abcd")
    assert label([copy], list(kernel), ["/box/ck"])[0] is None  # shutil fell back to read and write
    forged = Op(0, "fsync", api="os.fsync", path=ck)
    refused = label([forged], list(kernel), ["/box/ck"])[0]
    assert refused is not None and refused.startswith(MISMATCH) and "never saw" in refused


def test_the_kernels_calls_are_named_as_python_made_them():
    ck, log = "/box/ck/checkpoint.json", "/box/ck/run.log"
    ops = [Op(0, "open", api="os.open", path=ck, handle=1, flags=frozenset({"create"})),
           Op(1, "write", api="write", path=ck, handle=1, offset=0, data=b"{}", size=2),
           Op(2, "fsync", api="fsync", path=ck, handle=1),
           Op(3, "open", api="open", path=log, handle=2, size=10, flags=frozenset({"append", "existed", "create"})),
           Op(4, "write", api="write", path=log, handle=2, offset=-1, data=b"abc", size=3),
           Op(5, "write", api="write", path=log, handle=2, offset=-1, data=b"d", size=1),
           Op(6, "truncate", api="ftruncate", path=log, handle=2, size=0)]
    kernel_trace._python_words(ops, {})
    assert [op.api for op in ops] == ["os.open", "os.write", "os.fsync", "open", "write", "write", "truncate"]
    assert [ops[4].offset, ops[5].offset] == [10, 13]
    assert "write of 3 bytes to ck/run.log at offset 10" in ops[4].describe()
