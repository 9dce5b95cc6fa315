"""Caps on what a box can make the judge do: sizes, counts, lengths and references from a box.

A box's account of its files (the kernel's trace of it, or its recorder's) and its replies on the
wire are numbers the judge must not take at their word: a sparse 60 MiB file costs the box nothing,
a three-byte ``[]`` costs a decoder sixty. Each test below gives the judge's parts such numbers and
checks that they refuse with a reason, holding little memory (measured in a child process, so this
process's own heap does not count). The last test grades the hostile corpus's ``inflates_replay``,
``tells_huge_sizes``, ``amplifies_json``, ``amplifies_reply``, ``amplifies_call`` and ``churns_files`` with ``crashcourse
grade`` beside the working loop and measures every process of the batch (``getrusage``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.engine import crash_models
from grader.engine.crash_models import FileSystem, ReplayTooLarge
from grader.engine.ops import Op
from grader.grading import bubblewrap, kernel_trace, wire

KIT = Path(__file__).resolve().parent.parent
CORPUS = KIT / "tests" / "corpus" / "hostile"
MiB = 1 << 20


@pytest.fixture(autouse=True)
def _the_kits_cap(monkeypatch):
    """The cap as the kit ships it, whatever a test run in this process before set it to."""
    monkeypatch.setattr(crash_models, "HELD_LIMIT", crash_models.JUDGE_HELD_LIMIT)


def _op(kind: str, path: str = "/f", handle: int = 1, **fields) -> Op:
    return Op(0, kind, api=kind, path=path, handle=handle, **fields)


def _child_peak(code: str) -> tuple[str, int]:
    """What ``code`` prints, and the most memory (MiB) its process held, which it says last: VmHWM,
    the peak of its own memory since it started (ru_maxrss would count the parent's at the fork)."""
    code = textwrap.dedent(code) + textwrap.dedent("""
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                print(line.split()[1])
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=KIT)
    assert proc.returncode == 0, proc.stderr
    out, peak = proc.stdout.rstrip("\n").rsplit("\n", 1)
    return out, int(peak) // 1024


@pytest.mark.parametrize("ops", [
    [_op("open", path=f"/tmp/f{i}", handle=i, flags=frozenset({"create"})) for i in range(3)]
    + [_op("truncate", path=f"/tmp/f{i}", handle=i, size=60 * MiB) for i in range(3)],
    [_op("open", path=f"/tmp/f{i}", handle=i, flags=frozenset({"create"})) for i in range(3)]
    + [_op("write", path=f"/tmp/f{i}", handle=i, offset=60 * MiB, data=b"x", size=1) for i in range(3)],
], ids=["truncates", "writes far past the end"])
def test_a_replay_refuses_to_make_more_zeros_than_its_cap(ops):
    fs = FileSystem({}, ())
    with pytest.raises(ReplayTooLarge, match="a broken run.*more than 64 MiB"):
        for op in ops:
            fs.apply(op)
    assert fs.zeros <= crash_models.HELD_LIMIT + 60 * MiB  # refused before the next file was grown


def test_a_replay_counts_the_versions_it_keeps_and_an_fsync_frees_them():
    """Power-cut models keep every version of a file since its last fsync: a large file changed many
    times would be copied each time. Real bytes only here (no zeros), and within the cap while fsynced."""
    big = b"y" * (20 * MiB)
    fs = FileSystem({}, (), track_durability=True)
    fs.apply(_op("open", flags=frozenset({"create"})))
    for _ in range(8):  # 8 versions of 20 MiB, each fsynced: never more than one kept
        fs.apply(_op("write", offset=0, data=big, size=len(big)))
        fs.apply(_op("fsync"))
    assert fs.kept == 0
    with pytest.raises(ReplayTooLarge):
        for i in range(8):  # and not fsynced: the fourth version passes the cap
            fs.apply(_op("write", offset=i, data=big, size=len(big)))


def test_the_cap_is_lifted_for_a_users_own_program(monkeypatch):
    monkeypatch.setattr(crash_models, "HELD_LIMIT", None)
    fs = FileSystem({}, ())
    fs.apply(_op("open", flags=frozenset({"create"})))
    fs.apply(_op("truncate", size=100 * MiB))
    assert fs.zeros == 100 * MiB


def test_comparing_with_the_disk_reads_no_more_than_the_replay_holds(tmp_path):
    """A large file left in the watched folder is not read whole after every call: its size alone says
    it differs from the replay. (Before, each comparison read up to the folder's 512 MiB.)"""
    out, peak = _child_peak(f"""
        import os
        from grader.engine.recorder import Recorder
        rec = Recorder(watch=[{str(tmp_path)!r}])
        with rec:
            with open({str(tmp_path / "big.bin")!r}, "wb") as f:
                f.write(b"z")
        os.truncate({str(tmp_path / "big.bin")!r}, 400 << 20)  # behind the recorder's back, sparse
        rec.compare_with_disk()
        print(rec.unseen[-1])
    """)
    assert "big.bin holds 419430400 bytes on disk, but the recorded operations rebuild 1 bytes" in out
    assert peak < 150, f"the comparison held {peak} MiB"


def test_a_recording_refuses_a_watched_folder_planted_with_large_files(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"")
    os.truncate(tmp_path / "a.bin", 40 * MiB)
    (tmp_path / "b.bin").write_bytes(b"")
    os.truncate(tmp_path / "b.bin", 40 * MiB)
    from grader.engine.recorder import Recorder
    with pytest.raises(ReplayTooLarge):
        with Recorder(watch=[str(tmp_path)]):
            pass


def test_a_reply_that_would_cost_the_judge_far_more_than_its_size_is_refused_unread():
    count = (8 * MiB) // 3
    body = b'{"op":"return","value":[' + b"[]," * (count - 1) + b"[]]}"
    assert wire.decoded_cost(body) > wire.MAX_DECODED
    assert wire.unframe(b"%010d%010d" % (len(body), 0) + body) is None
    # An honest reply of the same size (one long text) is read.
    text = json.dumps({"op": "return", "value": "x" * (8 * MiB)}).encode()
    assert wire.unframe(b"%010d%010d" % (len(text), 0) + text)["value"] == "x" * (8 * MiB)


@pytest.mark.parametrize("field,value", [("size", 1 << 30), ("offset", 1 << 30), ("size", -1)])
def test_a_file_operation_past_the_boxs_file_cap_is_refused(field, value):
    fields = dict(zip(wire.OP_FIELDS, [0, "truncate", "os.truncate", "/tmp/x", None, 1, 0, b"", 0,
                                       frozenset(), False, None, ""]))
    fields[field] = value
    with pytest.raises(ValueError):
        wire.decode_op(fields)


def test_a_trace_keeps_no_more_operations_than_its_cap(tmp_path):
    """24,000 opens and closes (a trace of 64 MiB could name 1.6 million): the trace keeps MAX_OPS and
    says the run is broken; a fault check's list of calls is capped the same way."""
    from grader.grading.kernel_trace import MAX_OPS, KernelTrace
    for keep_calls in (False, True):
        trace = KernelTrace(str(tmp_path), keep_calls=keep_calls)
        trace.close()
        for _ in range(12_000):
            trace._line('7 openat(AT_FDCWD</tmp>, "/tmp/churn.bin", O_WRONLY|O_CREAT|O_CLOEXEC, 0644) = 3</tmp/churn.bin>')
            trace._line("7 close(3</tmp/churn.bin>) = 0")
        assert trace.refused and "more than 20,000 file operations" in trace.refused
        # (Writes back to back are one operation; the words say what still counts, and what to do then.)
        assert "back to back" in trace.refused and "in one write" in trace.refused
        assert len(trace.ops) <= MAX_OPS and len(trace.calls or ()) <= MAX_OPS


# -- through crashcourse grade -----------------------------------------------------------------------

EXPECTED = {
    "good": ("passed", 10.0, None),
    "inflates_replay": ("error", 0.0, "a broken run: rebuilding what your code did to files"),
    "tells_huge_sizes": ("error", 0.0, "could not read"),
    "amplifies_json": ("error", 0.0, "could not read"),
    "amplifies_reply": ("error", 0.0, "could not read"),
    "churns_files": ("error", 0.0, "more than 20,000 file operations"),
    "amplifies_call": ("error", 0.0, "with arguments that would cost the grader more than 256 MiB to read"),
}


@pytest.mark.bubblewrap
def test_a_batch_of_amplifying_boxes_keeps_every_judge_small(tmp_path):
    """Each of these would make a judge that took the box's numbers at their word hold a gigabyte or
    more. Graded in one batch, each is refused as a broken run, the working loop beside them earns
    full marks, and no process of the batch (a judge, a box, the batch itself) holds 300 MiB."""
    if bubblewrap.check() is not None:
        pytest.skip(f"no bubblewrap box here: {bubblewrap.check()}")
    subs = tmp_path / "subs"
    for name in EXPECTED:
        (subs / name).mkdir(parents=True)
        shutil.copy(CORPUS / f"{name}.py", subs / name / "agent.py")
    out = tmp_path / "report.json"
    # --timeout: each run is refused early, so the limit costs nothing, but churns_files' 24,000 traced
    # calls took more than 20 s on a machine at load 14 with the suite on two workers (stuck, not refused).
    measure = textwrap.dedent(f"""
        import resource, subprocess, sys
        proc = subprocess.run([sys.executable, "-m", "grader", "grade", {str(subs)!r}, "--level", "2", "--jobs", "2",
                               "--timeout", "60", "--examples", "2", "--no-progress", "--output", {str(out)!r}],
                              capture_output=True, text=True)
        print(proc.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
        print(proc.stderr, file=sys.stderr)
    """)
    proc = subprocess.run([sys.executable, "-c", measure], capture_output=True, text=True, timeout=300, cwd=KIT,
                          env=dict(os.environ, TMPDIR=str(tmp_path)))
    code, peak = map(int, proc.stdout.split())
    assert code == 0, proc.stderr
    report = {s["id"]: s for s in json.loads(out.read_text())["submissions"]}
    for name, (status, score, words) in EXPECTED.items():
        if name == "churns_files" and kernel_trace.problem():
            continue  # its operations are outside the folder: without the kernel's account no one counts them
        got = report[name]
        text = (got["error"] or "") + "\n".join(t["output"] for t in got["tests"])
        assert (got["status"], got["score"]) == (status, score), (name, text[:1500])
        if words:
            assert words in text, (name, text[:1500])
    assert peak < 300, f"a process of the batch held {peak} MiB"
