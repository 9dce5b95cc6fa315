"""Caps on what a box can make the judge do, and what no single submission may do to the batch.

The wire refuses references to more bytes than a reply carries and file operations past a box's
file cap; the judge runs under an address-space cap; text from a box is made safe before the
journal or a report; ids are unique or refused by name; what a killed batch leaves is swept.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.grading import batch, bubblewrap, sandbox, wire
from grader.grading.wire import Blob, frame, unframe

KIT = Path(__file__).resolve().parent.parent


# -- the wire ------------------------------------------------------------------------------------------

def _reply(body: dict, blob: bytes) -> bytes:
    text = json.dumps(body).encode()
    return b"%010d%010d" % (len(text), len(blob)) + text + blob


def test_an_honest_reply_with_many_blobs_decodes():
    message = {"op": "return", "value": [Blob(b"a" * 10), Blob(b"b" * 20), {"x": Blob(b"")}, Blob(b"a" * 10)]}
    assert unframe(frame(message)) == {"op": "return", "value": [b"a" * 10, b"b" * 20, {"x": b""}, b"a" * 10]}


@pytest.mark.parametrize("times", [2, 600])
def test_a_reply_that_points_at_its_bytes_again_and_again_is_refused(times):
    blob = b"x" * 4096
    assert unframe(_reply({"op": "return", "value": [{"$B": [0, len(blob)]}] * times}, blob)) is None
    # Overlapping references that add up to more than was sent are the same trick.
    assert unframe(_reply({"op": "return", "value": [{"$B": [0, 4000]}, {"$B": [96, 4000]}]}, blob)) is None
    assert unframe(_reply({"op": "return", "value": [{"$B": [0, 4000]}, {"$B": [4000, 96]}]}, blob)) is not None


def _op(**fields) -> dict:
    values = {"index": 0, "kind": "write", "api": "os.write", "path": "/x/checkpoint.json", "dest": None,
              "handle": 1, "offset": 0, "data": {"$B": [0, 0]}, "size": 0, "flags": {"$s": []}, "is_dir": False,
              "payload": None, "note": ""}
    values.update(fields)
    return {"$op": [values[name] for name in wire.OP_FIELDS]}


@pytest.mark.parametrize("fields", [{"kind": "truncate", "size": 700 * 1024 ** 2}, {"offset": 2 ** 40},
                                    {"kind": "truncate", "size": -1}, {"offset": wire.MAX_FILE}],
                         ids=["truncate to 700 MiB", "write at 1 TiB", "negative size", "write past the cap"])
def test_a_file_operation_past_the_boxs_file_cap_is_refused(fields):
    blob = b"z" if "offset" in fields else b""
    op = _op(**fields, data={"$B": [0, len(blob)]})
    assert unframe(_reply({"op": "ops", "ops": [op]}, blob)) is None
    fine = unframe(_reply({"op": "ops", "ops": [_op(kind="truncate", size=1024)]}, b""))
    assert fine["ops"][0].size == 1024


def test_the_wires_file_cap_is_the_boxs():
    assert wire.MAX_FILE == sandbox.Limits().file_size == bubblewrap.Limits().file_size


# -- the judge's own cap -------------------------------------------------------------------------------

def test_a_judge_under_its_cap_fails_with_memory_error_and_its_boxes_keep_their_own():
    code = ("import resource, sys; sys.path.insert(0, sys.argv[1]); from grader.grading import batch\n"
            "batch.cap_judge_memory(512 * 1024 ** 2)\n"
            "try:\n    b = bytearray(1024 ** 3)\nexcept MemoryError:\n    print('MemoryError')\n"
            "resource.setrlimit(resource.RLIMIT_AS, (2 * 1024 ** 3, 2 * 1024 ** 3))\n"  # what a box's start does
            "print('box cap', resource.getrlimit(resource.RLIMIT_AS)[0])\n")
    proc = subprocess.run([sys.executable, "-c", code, str(KIT)], capture_output=True, text=True, timeout=60)
    assert proc.stdout.split("\n")[:2] == ["MemoryError", f"box cap {2 * 1024 ** 3}"], proc.stdout + proc.stderr
    assert batch.JUDGE_MEMORY >= 2 * 1024 ** 3


# -- text from a box -------------------------------------------------------------------------------------

def test_text_from_a_box_is_made_safe_everywhere_in_a_result():
    result = {"id": "a\ud800", "error": "bad \ud800\udfff \x1b[2J\r\x07end\n\ttab",
              "tests": [{"name": "t", "output": "\x00\x9b fine ü ☃"}], "score": 1.0}
    clean = batch.safe_text(result)
    assert clean == {"id": "a\ufffd", "error": "bad \ufffd\ufffd [2Jend\n\ttab",
                     "tests": [{"name": "t", "output": " fine ü ☃"}], "score": 1.0}
    json.dumps(clean, ensure_ascii=False).encode("utf-8")  # writable as UTF-8


# -- ids -------------------------------------------------------------------------------------------------

def test_colliding_ids_are_refused_naming_both(tmp_path):
    (tmp_path / "bob").mkdir()
    (tmp_path / "bob.zip").write_bytes(b"PK")
    (tmp_path / "ann smith").mkdir()
    (tmp_path / "ann_smith").mkdir()
    (tmp_path / "carol").mkdir()
    keep, refused = batch.unique_ids(batch.discover(str(tmp_path)))
    assert [student for student, _ in keep] == ["carol"]
    by_id = {r["id"]: r for r in refused}
    assert set(by_id) == {"bob/", "bob.zip", "ann smith/", "ann_smith/"}
    assert all(r["status"] == "error" for r in refused)
    assert "'bob/'" in by_id["bob.zip"]["error"] and "'bob.zip'" in by_id["bob.zip"]["error"]
    assert "'ann smith/'" in by_id["ann_smith/"]["error"] and "rename one" in by_id["ann_smith/"]["error"]


# -- what a killed batch leaves --------------------------------------------------------------------------

def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_the_folders_of_a_batch_that_is_gone_are_swept_and_a_live_ones_are_kept(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    dead = tmp_path / f"{batch.ROOT_PREFIX}{_dead_pid()}-abcd_123"
    live = tmp_path / f"{batch.ROOT_PREFIX}{os.getppid()}-abcd_123"
    mine = tmp_path / f"{batch.ROOT_PREFIX}{os.getpid()}-abcd_123"
    student_run = tmp_path / "crashcourse-abcd1234"  # a learner's own explore folder: never the batch's
    other = tmp_path / "unrelated"
    for folder in (dead, live, mine, student_run, other):
        (folder / "submission").mkdir(parents=True)
    swept = batch.sweep_leftovers()
    assert str(dead) in swept and not dead.exists()
    assert live.exists() and mine.exists() and student_run.exists() and other.exists()


@pytest.mark.bubblewrap
@pytest.mark.skipif(bubblewrap.check() is not None, reason="needs a bubblewrap box")
def test_a_batch_killed_outright_leaves_nothing_the_next_batch_does_not_sweep(tmp_path):
    temp = tmp_path / "temp"
    temp.mkdir()
    (tmp_path / "subs" / "slow").mkdir(parents=True)
    (tmp_path / "subs" / "slow" / "agent.py").write_text("import time\ntime.sleep(60)\n")
    env = {k: v for k, v in os.environ.items() if k != "CRASHCOURSE_ROOT"}
    env["TMPDIR"] = str(temp)
    proc = subprocess.Popen([sys.executable, "-m", "grader", "grade", str(tmp_path / "subs"), "--level", "2",
                             "--examples", "1", "--timeout", "60", "--output", str(tmp_path / "r.json")],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    ours: list = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            boxes = [p for p in temp.glob(f"{batch.ROOT_PREFIX}{proc.pid}-*")]
            # This batch's boxes' cgroups (other batches may be running beside this one, with theirs)
            ours = _cgroups_of(_processes_of(temp))
            if boxes and (os.geteuid() != 0 or ours):
                break
            time.sleep(0.2)
        assert boxes, "the batch never started a judge"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    # The judges and their boxes die with the batch (die-with-parent), each a moment later on a busy
    # machine: what the next batch finds is what is left once they are gone.
    deadline = time.monotonic() + 60
    while (_processes_of(temp) or any(_busy(c) for c in ours)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _processes_of(temp), "a judge or a box outlived the batch"
    assert list(temp.glob(f"{batch.ROOT_PREFIX}{proc.pid}-*")), "nothing was left to sweep"
    found = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                            "from grader.grading import batch; print(len(batch.sweep_leftovers(cgroup_age=0)))",
                            str(KIT)], env=env, capture_output=True, text=True, timeout=60)
    assert found.returncode == 0, found.stderr
    assert not list(temp.glob(f"{batch.ROOT_PREFIX}{proc.pid}-*"))
    assert not [c for c in ours if os.path.isdir(c)], "a cgroup of this batch's boxes was left"


def _processes_of(temp: Path) -> list:
    """The batch's processes, judges and boxes alike: their environment names its temp folder."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if str(temp).encode() in f.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


def _cgroups_of(pids: list) -> list:
    """The box cgroups (``_box_cgroups``) that hold one of ``pids``."""
    return [c for c in _box_cgroups() if set(_procs(c)) & set(pids)]


def _procs(cgroup: str) -> list:
    try:
        with open(os.path.join(cgroup, "cgroup.procs")) as f:
            return [int(line) for line in f.read().split()]
    except OSError:
        return []


def _busy(cgroup: str) -> bool:
    return bool(_procs(cgroup))


def _box_cgroups() -> list:
    out = []
    for base in {b for b in [bubblewrap._v1_base(c) for c in ("pids", "memory")] + [bubblewrap._v2_base()] if b}:
        out += [os.path.join(base, n) for n in os.listdir(base) if n.startswith("crashcourse-")]
    return out


# -- the kit's own folder ----------------------------------------------------------------------------------

# Python compiles a package's __init__ and the entry module before any of their code runs: these four
# are grade's own entry, and the only compiled files it may leave (python -B, or PYTHONDONTWRITEBYTECODE,
# leaves none at all).
ENTRY = {"grader/__pycache__/__init__", "grader/__pycache__/__main__", "grader/faces/__pycache__/__init__",
         "grader/faces/__pycache__/cli"}


@pytest.mark.bubblewrap  # grades through crashcourse grade's box (tests/conftest.py: SYSTEM_MARKERS)
def test_grade_from_a_checkout_writes_nothing_into_the_kit(tmp_path):
    """A checkout (as an editable install reads it), with bytecode writing on: after a batch with
    --seed and a relative --scenarios, the kit holds exactly the files it held, but grade's entry."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=KIT, capture_output=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    kit = tmp_path / "kit"
    for name in tracked.stdout.decode().split("\0"):
        if name and (KIT / name).is_file():
            (kit / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(KIT / name, kit / name)
    before = {str(p.relative_to(kit)) for p in kit.rglob("*")}
    (tmp_path / "subs" / "a").mkdir(parents=True)
    shutil.copy(KIT / "solutions" / "level2" / "agent.py", tmp_path / "subs" / "a" / "agent.py")
    (tmp_path / "private.json").write_text(json.dumps({"file": "agent.py", "function": "run_agent", "scenarios": [
        {"name": "x", "task": "t", "turns": [["read", {}, "r"]]}]}))
    env = {k: v for k, v in os.environ.items() if k not in ("CRASHCOURSE_ROOT", "PYTHONDONTWRITEBYTECODE")}
    env["PYTHONPATH"] = str(kit)
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", "subs", "--level", "2", "--examples", "1",
                           "--seed", "5", "--scenarios", "private.json", "--output", "r.json"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "r.json").read_text())
    assert [t["name"] for t in report["submissions"][0]["tests"]][-1] == "instructor scenario 1"
    new = {str(p.relative_to(kit)) for p in kit.rglob("*")} - before
    left = {n.rsplit(".cpython", 1)[0] for n in new if n.endswith(".pyc")}
    assert left <= ENTRY and {n for n in new if not n.endswith(".pyc")} <= {"grader/__pycache__",
                                                                          "grader/faces/__pycache__"}, sorted(new)


@pytest.mark.parametrize("cores, gib, expected", [
    (1, 16, 2),    # one core: two at a time, as a judge and its code take turns
    (2, 24, 4),    # the development machine
    (4, 64, 8),
    (32, 256, 8),  # never more than eight
    (8, 3, 3),     # one per GiB of memory
    (2, 0, 4),     # memory unknown: the cores decide
])
def test_default_jobs_two_per_core_within_memory(monkeypatch, cores, gib, expected):
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cores)), raising=False)
    pages = {"SC_PHYS_PAGES": gib * 1024 ** 3 // 4096, "SC_PAGE_SIZE": 4096}
    monkeypatch.setattr(os, "sysconf", lambda name: pages[name])
    assert batch.default_jobs() == expected


def test_grade_without_jobs_uses_the_default(monkeypatch, tmp_path):
    from grader.faces import instructor_cli
    seen = {}

    def fake_batch(submissions, level, *, jobs, **_):
        seen["jobs"] = jobs
        raise KeyboardInterrupt  # enough: the value reached the batch

    monkeypatch.setattr(batch, "default_jobs", lambda: 5)
    monkeypatch.setattr(batch, "grade_batch", fake_batch)
    (tmp_path / "subs" / "ann").mkdir(parents=True)
    parser = instructor_cli.argparse.ArgumentParser()
    instructor_cli.register(parser.add_subparsers())
    args = parser.parse_args(["grade", str(tmp_path / "subs"), "--level", "2", "--no-box",
                              "--output", str(tmp_path / "report.json")])
    assert args.jobs is None
    try:
        args.handler(args)
    except (KeyboardInterrupt, SystemExit):
        pass
    assert seen.get("jobs") == 5
