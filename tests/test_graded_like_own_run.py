"""A graded run looks like any other: what code can see of itself under ``crashcourse grade`` and under
the learner's own ``pytest``, compared.

A probe (the level's solution, plus a look around) reports what it sees: its environment, the
machine's name, its user, its interpreter's flags and command line, pytest's variables. Run under
``pytest exercises/level2`` and under ``grade``, the two must agree, except for what a box cannot
hide and the README names (a pid namespace: the code is pid 2 with bwrap as its parent; uid 1000
and no entry for it in ``/etc/passwd``; ``python -S``; pytest not loaded in the box's process).

On level 3, a check that needs a fault (an fsync that fails, a folder that cannot be opened) runs
the same steps in a fresh worker without the fault and then with it, the fault made by the kernel.
A probe there compares everything it can see in each worker with what it saw in the others (kept
in a file in its HOME, which outlives a worker) and raises at once if anything differs: none does,
so it earns the full marks of the solution it wraps.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.grading import bubblewrap

KIT = Path(__file__).resolve().parent.parent

OBSERVE = '''

def _observe():
    import getpass, os, socket, sys
    try:
        user = getpass.getuser()
    except Exception as exc:  # noqa: BLE001
        user = "(" + type(exc).__name__ + ")"
    return {"env": {k: v for k, v in os.environ.items()}, "host": socket.gethostname(), "uid": os.getuid(),
            "user": user, "pid": os.getpid(), "ppid": os.getppid(), "argv0": os.path.basename(sys.argv[0]),
            "flags": sorted(f for f in ("isolated", "no_site", "ignore_environment", "no_user_site", "safe_path",
                                        "optimize", "inspect", "verbose") if getattr(sys.flags, f, 0)),
            "hash_randomized": bool(sys.flags.hash_randomization), "pytest": "pytest" in sys.modules}
'''

LEVEL2_PROBE = OBSERVE + '''

def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    raise RuntimeError("PROBE " + __import__("json").dumps(_observe()) + " END")
'''

# Level 3: every worker's view, compared with every other's, at every save.
LEVEL3_PROBE = OBSERVE + '''

import json as _json

_ME = os.urandom(8).hex()  # this process (every worker is pid 2 in its own pid namespace)
# In HOME, which every worker of a submission shares (each box has a /tmp of its own).
_NOTES = os.path.join(os.path.expanduser("~"), "probe-notes.jsonl")
_real_save = save_checkpoint


def _view():
    seen = _observe()
    seen["env"].pop("PYTEST_CURRENT_TEST", None)  # names the test running: differs from test to test
    with open("/proc/self/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    for key in ("TracerPid", "Seccomp", "NoNewPrivs", "CapEff", "CapBnd", "Uid", "Gid", "Groups"):
        seen[key] = status.get(key, "").strip()
    import resource
    seen["limits"] = [resource.getrlimit(getattr(resource, n)) for n in dir(resource) if n.startswith("RLIMIT_")]
    seen["umask"] = os.umask(0o022)
    os.umask(seen["umask"])
    seen["fds"] = sorted(os.listdir("/proc/self/fd"))
    with open("/proc/self/mountinfo") as f:
        seen["mounts"] = sorted(" ".join(line.split()[3:5]) for line in f)
    seen["threads"] = len(os.listdir("/proc/self/task"))
    return seen


def save_checkpoint(state, directory="checkpoints"):
    mine = _view()
    others = []
    if os.path.exists(_NOTES):
        with open(_NOTES) as f:
            others = [_json.loads(line) for line in f if line.strip()]
    for other in others:
        if other["me"] != _ME:
            differs = sorted(k for k in mine if _json.dumps(mine[k], sort_keys=True) != _json.dumps(other["seen"][k], sort_keys=True))
            if differs:
                raise RuntimeError("TOLD " + ", ".join(f"{k}: {other['seen'][k]} then {mine[k]}" for k in differs))
    if not any(o["me"] == _ME for o in others):
        with open(_NOTES, "a") as f:
            f.write(_json.dumps({"me": _ME, "seen": mine}) + "\\n")
    return _real_save(state, directory)
'''


def _box_or_skip() -> None:
    if bubblewrap.check() is not None:
        pytest.skip(f"no bubblewrap box here: {bubblewrap.check()}")


def _grade(tmp_path: Path, level: int, source: str) -> dict:
    subs = tmp_path / "subs"
    (subs / "probe").mkdir(parents=True)
    (subs / "probe" / "agent.py").write_text(source)
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(subs), "--level", str(level), "--jobs", "1",
                           "--timeout", "60", "--examples", "1", "--no-progress", "--output", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=KIT,
                          env=dict(os.environ, TMPDIR=str(tmp_path)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(out.read_text())["submissions"][0]


def _probe(text: str) -> dict:
    m = re.search(r"PROBE (\{.*?\}) END", text, re.S)
    assert m, text[:3000]
    return json.loads(m.group(1))


# An ordinary shell's environment, with what a learner's machine might add.
OWN = {"HOME", "PATH", "LANG", "USER", "LOGNAME", "SHELL", "TERM", "PWD", "TMPDIR"}


@pytest.mark.bubblewrap  # tests/conftest.py: SYSTEM_MARKERS
def test_level2_code_sees_the_same_under_grade_as_under_its_own_pytest(tmp_path):
    _box_or_skip()
    source = (KIT / "solutions" / "level2" / "agent.py").read_text() + LEVEL2_PROBE
    graded = _grade(tmp_path, 2, source)
    graded = _probe("\n".join(t["output"] for t in graded["tests"]))

    folder = tmp_path / "own" / "probe"
    folder.mkdir(parents=True)
    (folder / "agent.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if k in OWN}
    env.update(HOME=str(tmp_path / "own"), USER="ann", LOGNAME="ann", TMPDIR=str(tmp_path))
    own = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "exercises/level2/test_agent.py::test_the_loop_still_finishes_the_task",
                          "--submission", str(folder)], capture_output=True, text=True, timeout=300, cwd=KIT, env=env)
    own = _probe(own.stdout)

    # No variable the learner's own run would not have, none naming the grader, pytest's as pytest set them.
    extra = set(graded["env"]) - set(own["env"]) - OWN
    assert not extra, extra
    assert not [k for k in graded["env"] if re.search("CRASHCOURSE|GRAD|SANDBOX|BOX|JUDGE", k, re.I)]
    for name in ("PYTEST_CURRENT_TEST", "PYTEST_VERSION"):
        assert graded["env"].get(name) == own["env"].get(name), name
    assert "PYTHONHASHSEED" not in graded["env"] and graded["hash_randomized"] == own["hash_randomized"]
    assert graded["host"] == own["host"]
    assert not graded["user"].startswith("(")  # getpass.getuser() answers, as on any machine
    assert graded["argv0"] == own["argv0"] == "__main__.py"  # pytest's entry point, not -c
    # What a box cannot hide, as the README says: a pid namespace (the code is pid 2 under bwrap),
    # the box's uid, `python -S`, and no pytest in the box's process.
    assert (graded["pid"], graded["ppid"]) == (2, 1)
    assert graded["uid"] == 1000
    assert graded["flags"] == ["no_site"] and own["flags"] == []
    assert (graded["pytest"], own["pytest"]) == (False, True)


@pytest.mark.bubblewrap  # tests/conftest.py: SYSTEM_MARKERS
def test_a_level3_fault_run_looks_like_every_other_run(tmp_path):
    """Under grade, every worker of the submission (the plain runs, each fault check's run without the
    fault and its run with it) sees the same: a probe that compares them all, and raises on any
    difference, earns the 10 of the solution it wraps."""
    _box_or_skip()
    source = (KIT / "solutions" / "level3" / "agent.py").read_text() + LEVEL3_PROBE
    graded = _grade(tmp_path, 3, source)
    text = (graded["error"] or "") + "\n".join(t["output"] for t in graded["tests"])
    assert "TOLD" not in text, text[:3000]
    assert (graded["status"], graded["score"]) == ("passed", 10.0), text[:3000]


def test_the_level3_probe_tells_two_different_views_apart(tmp_path):
    """The probe above is not blind: given a note from a worker that saw another environment, it raises."""
    source = (KIT / "solutions" / "level3" / "agent.py").read_text() + LEVEL3_PROBE
    (tmp_path / "agent.py").write_text(source)
    code = f"""
import importlib.util, json, os, sys
spec = importlib.util.spec_from_file_location("probe", {str(tmp_path / "agent.py")!r})
probe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(probe)
seen = probe._view()
seen["env"]["CRASHCOURSE_FAULT"] = "fsync"
with open(probe._NOTES, "w") as f:
    f.write(json.dumps({{"me": "another", "seen": seen}}) + "\\n")
try:
    probe.save_checkpoint({{"version": 1}}, {str(tmp_path / "ck")!r})
except RuntimeError as exc:
    print(exc)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, HOME=str(tmp_path)))
    assert done.stdout.startswith("TOLD env:"), done.stdout + done.stderr
    shutil.rmtree(tmp_path / "ck", ignore_errors=True)
