"""A graded run looks like any other: what code can see of itself under ``crashcourse grade`` and under
the learner's own ``pytest``, compared.

A probe (the level's solution, plus a look around) reports what it sees: its environment, the
machine's name, its user and its passwd entry, its interpreter's flags and command line, what
``site`` gives a run, pytest's variables, its HOME and its own folder. Run under ``pytest
exercises/level2`` and under ``grade``, the two must agree, except for what a box cannot hide and
the README names (a pid namespace: the code is pid 2 with bwrap as its parent; pytest not loaded in
the box's process). A second probe reads smaller things (sys.dont_write_bytecode, faulthandler, the
garbage collector, exception hooks, umask, signal handlers, limits, descriptors, /proc/self/status,
cgroup, command line): those a box can set as the learner's run has them must agree (ALIKE), and
what it cannot hide is pinned as it shows under grade (the hostile corpus holds a loop keyed on each).

On level 3, a check that needs a fault (an fsync that fails, a folder that cannot be opened) runs
the same steps in a fresh worker without the fault and then with it, the fault made by the kernel.
The probe there leaves a note, at the first save into each folder, wherever a later worker could
find it (its HOME, its own folder, the temp folder, the folder above the checkpoint folder) and
prints, for each such save, a digest of everything it sees and how many notes of other workers it
found. Every worker must see the same, and the runs of one check's steps (with the fault and
without) the same notes: a count kept in files cannot tell the run with the fault.
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
    import builtins, getpass, grp, os, pwd, socket, sys
    try:
        user = getpass.getuser()
    except Exception as exc:  # noqa: BLE001
        user = "(" + type(exc).__name__ + ")"
    try:
        entry = pwd.getpwuid(os.getuid())
        entry = [entry.pw_name, entry.pw_dir, entry.pw_shell]
    except KeyError:
        entry = None
    try:
        group = grp.getgrgid(os.getgid()).gr_name
    except KeyError:
        group = None
    home = os.path.expanduser("~")
    return {"env": {k: v for k, v in os.environ.items()}, "host": socket.gethostname(), "uid": os.getuid(),
            "user": user, "passwd": entry, "group": group, "pid": os.getpid(), "ppid": os.getppid(),
            "argv0": os.path.basename(sys.argv[0]),
            "flags": sorted(f for f in ("isolated", "no_site", "ignore_environment", "no_user_site", "safe_path",
                                        "optimize", "inspect", "verbose") if getattr(sys.flags, f, 0)),
            "site": sorted(n for n in ("exit", "quit", "help", "copyright", "credits", "license")
                           if hasattr(builtins, n)),
            "home_entries": sorted(os.listdir(home)) if os.path.isdir(home) else None,
            "folder_entries": sorted(os.listdir(os.path.dirname(os.path.abspath(__file__)))),
            "hash_randomized": bool(sys.flags.hash_randomization), "pytest": "pytest" in sys.modules,
            "dont_write_bytecode": sys.dont_write_bytecode}
'''

SIGNS = '''

import os


def _signs():
    """Smaller things a run could look at, each compared between the two runs."""
    import faulthandler, gc, resource, signal, stat, sys, threading
    out = {"dont_write_bytecode": sys.dont_write_bytecode, "pycache_prefix": sys.pycache_prefix,
           "flags": repr(sys.flags), "recursion": sys.getrecursionlimit(), "switch": sys.getswitchinterval(),
           "gc": [gc.isenabled(), list(gc.get_threshold()), gc.get_freeze_count() > 0], "trace": [sys.gettrace() is not None,
                                                                   sys.getprofile() is not None],
           "faulthandler": faulthandler.is_enabled(), "threads": threading.active_count(),
           "excepthook": [sys.excepthook is sys.__excepthook__, threading.excepthook is threading.__excepthook__,
                          sys.unraisablehook is sys.__unraisablehook__],
           "stdio_types": [type(s).__name__ for s in (sys.stdin, sys.stdout, sys.stderr)],
           "orig_argv": [os.path.basename(a) for a in sys.orig_argv[:3]] if hasattr(sys, "orig_argv") else None,
           "gid": os.getgid(), "groups": len(os.getgroups()), "euid_is_uid": os.geteuid() == os.getuid(),
           "cwd_is_folder": os.getcwd() == os.path.dirname(os.path.abspath(__file__)),
           "sid_is_pid": os.getsid(0) == os.getpid(), "pgrp_is_pid": os.getpgrp() == os.getpid(),
           "alarm": signal.getitimer(signal.ITIMER_REAL)[0] > 0,
           "handlers": [str(signal.getsignal(n)).split(" at 0x")[0] for n in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE,
                                                           signal.SIGCHLD, signal.SIGALRM, signal.SIGHUP)]}
    old = os.umask(0o022)
    os.umask(old)
    out["umask"] = oct(old)
    out["rlimits"] = {n: resource.getrlimit(getattr(resource, n)) for n in sorted(dir(resource))
                      if n.startswith("RLIMIT_")}
    fds = sorted(int(n) for n in os.listdir("/proc/self/fd"))
    kinds = {}
    for fd in fds[:20]:
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            continue
        kinds[fd] = ("pipe" if stat.S_ISFIFO(mode) else "tty" if stat.S_ISCHR(mode) and os.isatty(fd) else
                     "chr" if stat.S_ISCHR(mode) else "sock" if stat.S_ISSOCK(mode) else "file" if stat.S_ISREG(mode)
                     else "dir" if stat.S_ISDIR(mode) else "other")
    out["fds"] = {"count": len(fds), "std": [kinds.get(n) for n in (0, 1, 2)]}
    with open("/proc/self/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    out["status"] = {k: status.get(k, "").strip() for k in ("TracerPid", "Seccomp", "NoNewPrivs", "CapEff",
                                                           "CapPrm", "CapBnd", "CapAmb", "Threads")}
    for name in ("cgroup", "loginuid", "sessionid", "oom_score_adj", "attr/current"):
        try:
            with open("/proc/self/" + name) as f:
                out[name] = f.read().strip()[:300]
        except OSError as exc:
            out[name] = type(exc).__name__
    try:
        with open("/proc/%d/cmdline" % os.getppid(), "rb") as f:
            out["parent"] = [os.path.basename(w.decode()) for w in f.read().split(b"\\0")[:2]]
    except OSError as exc:
        out["parent"] = type(exc).__name__
    with open("/proc/self/cmdline", "rb") as f:
        out["cmdline"] = [os.path.basename(w.decode()) for w in f.read().split(b"\\0")[:3]]
    with open("/proc/self/mountinfo") as f:
        out["mounts"] = len(f.readlines())
    with open("/proc/self/stat") as f:
        data = f.read()
    out["nice"] = data[data.rindex(")") + 2:].split()[16]
    out["cpus"] = len(os.sched_getaffinity(0))
    out["grader_modules"] = sorted(m for m in sys.modules if m == "grader" or m.startswith("grader."))
    out["harness_modules"] = sorted(m for m in ("pytest", "_pytest", "pluggy", "hypothesis") if m in sys.modules)
    frame, callers = sys._getframe(1), []
    while frame is not None:
        callers.append(frame.f_globals.get("__name__", "?"))
        frame = frame.f_back
    out["callers"] = callers
    return out


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    import base64, json, zlib
    raise RuntimeError("SIGNS " + base64.b64encode(zlib.compress(json.dumps(_signs()).encode(), 9)).decode() + " END")
'''

LEVEL2_PROBE = OBSERVE + '''

def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    raise RuntimeError("PROBE " + __import__("json").dumps(_observe()) + " END")
'''

# Level 3: at the first save into each folder, a note left wherever a later worker could find it, and
# a line saying what this process sees (a digest) and how many notes of other workers it found there.
LEVEL3_PROBE = OBSERVE + '''

import hashlib as _hashlib
import json as _json
import tempfile as _tempfile

_ME = os.urandom(8).hex()
_NOTED = set()
_VERSION_AT_IMPORT = os.environ.get("PYTEST_VERSION")  # pytest sets it before it imports anything
_real_save = save_checkpoint


def _worker():
    # The box's first process (bwrap) and its start: the same for a worker and every process it forks.
    with open("/proc/1/stat") as f:
        data = f.read()
    return data[data.rindex(")") + 2:].split()[19]


def _view():
    seen = _observe()
    seen["env"].pop("PYTEST_CURRENT_TEST", None)  # names the test running: differs from test to test
    seen["version_at_import"] = _VERSION_AT_IMPORT  # a fork of the worker imports afresh
    for key in ("pid", "ppid", "home_entries", "folder_entries"):  # a fork of the worker has its own pid, and its notes
        seen.pop(key)
    with open("/proc/self/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    for key in ("TracerPid", "Seccomp", "NoNewPrivs", "CapEff", "CapBnd", "Uid", "Gid", "Groups"):
        seen[key] = status.get(key, "").strip()
    import resource
    seen["limits"] = [resource.getrlimit(getattr(resource, n)) for n in dir(resource) if n.startswith("RLIMIT_")]
    seen["umask"] = os.umask(0o022)
    os.umask(seen["umask"])
    with open("/proc/self/mountinfo") as f:
        seen["mounts"] = sorted(" ".join(line.split()[3:5]) for line in f)
    return seen


def save_checkpoint(state, directory="checkpoints"):
    if directory not in _NOTED:
        _NOTED.add(directory)
        mine = _worker()
        places = {"folder": os.path.dirname(os.path.abspath(__file__)), "home": os.path.expanduser("~"),
                  "parent": os.path.dirname(os.path.abspath(directory)), "tmp": _tempfile.gettempdir()}
        found = []
        for name, place in sorted(places.items()):
            try:
                notes = [n for n in os.listdir(place) if n.startswith(".probe-")]
            except OSError:
                notes = []
            found.append(str(min(9, sum(n.split("-")[1] != mine for n in notes))))
            try:
                open(os.path.join(place, ".probe-" + mine + "-" + _ME), "w").close()
            except OSError:
                pass
        digest = _hashlib.sha256(_json.dumps(_view(), sort_keys=True).encode()).hexdigest()[:8]
        where = _hashlib.sha256(os.path.abspath(directory).encode()).hexdigest()[:6]
        print("V w=" + mine + " d=" + where + " v=" + digest + " o=" + "".join(found), flush=True)
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


JUDGE = """
import json, os, shutil, sys, tempfile
from grader.grading import bubblewrap, sandbox
from grader.grading.judge import run_judge
root = tempfile.mkdtemp(prefix="judge-")
shutil.copytree(sys.argv[1], os.path.join(root, "submission"))
sandbox.set_subreaper()
bubblewrap.private_disk(root, bubblewrap.Limits().disk)  # as a batch's judge does (batch._start)
result = run_judge(sys.argv[2], os.path.join(root, "submission"), root, "probe", timeout=60, examples=1,
                   student="probe", boxed=True)
print("RESULT " + json.dumps(result))
"""


def _judge(tmp_path: Path, level: int, source: str) -> dict:
    """One submission through the judge a batch forks, with what it printed (no report format carries that)."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "agent.py").write_text(source)
    done = subprocess.run([sys.executable, "-c", JUDGE, str(tmp_path / "sub"), str(KIT / "exercises" / f"level{level}")],
                          capture_output=True, text=True, timeout=600, cwd=KIT, env=dict(os.environ, TMPDIR=str(tmp_path)))
    m = re.search(r"^RESULT (.*)$", done.stdout, re.M)
    assert m, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(m.group(1))


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
    # The box's uid has its entry in /etc/passwd (its HOME) and a group, as on any machine.
    assert graded["passwd"] is not None and graded["passwd"][:2] == [graded["user"], graded["env"]["HOME"]]
    assert graded["group"] is not None
    # No `python -S` or -I: sys.flags as in the learner's own run, and what site gives any run.
    assert graded["flags"] == own["flags"] == []
    assert graded["site"] == own["site"] == ["copyright", "credits", "exit", "help", "license", "quit"]
    # The first worker starts from an empty HOME and the folder as handed in, plus what importing the
    # code leaves in a usual run: Python writes byte-code caches (sys.dont_write_bytecode unset in both).
    assert graded["dont_write_bytecode"] is own["dont_write_bytecode"] is False
    assert graded["home_entries"] == [] and graded["folder_entries"] == own["folder_entries"] == ["__pycache__",
                                                                                                   "agent.py"]
    # What a box cannot hide, as the README says: a pid namespace (the code is pid 2 under bwrap),
    # the box's uid, and no pytest in the box's process.
    assert (graded["pid"], graded["ppid"]) == (2, 1)
    assert graded["uid"] == 1000
    assert (graded["pytest"], own["pytest"]) == (False, True)


# What the probe above reads that a learner's own pytest run and a graded one show alike, and what a
# box shows that their own run does not (KNOWN GAPS, each held at what grade shows today, so a change
# shows; README, "Why a submission cannot grade itself"). A loop keyed on one of these earns 10 under
# grade where its own run gets what its unwatched save earns (tests/corpus/hostile: saves_well_*).
ALIKE = ("dont_write_bytecode", "pycache_prefix", "flags", "recursion", "switch", "gc", "trace", "faulthandler",
         "threads", "excepthook", "umask", "cwd_is_folder", "sid_is_pid", "pgrp_is_pid", "alarm", "handlers",
         "nice", "cpus", "euid_is_uid")


def _signs_of(text: str) -> dict:
    import base64
    import zlib
    m = re.search(r"SIGNS (\S+) END", text)
    assert m, text[-3000:]
    return json.loads(zlib.decompress(base64.b64decode(m.group(1))))


@pytest.mark.bubblewrap  # tests/conftest.py: SYSTEM_MARKERS
def test_smaller_signs_under_grade_and_under_its_own_pytest(tmp_path):
    _box_or_skip()
    graded = _grade(tmp_path, 2, SIGNS)
    graded = _signs_of("\n".join(t["output"] for t in graded["tests"]))
    folder = tmp_path / "own" / "probe"
    folder.mkdir(parents=True)
    (folder / "agent.py").write_text(SIGNS)
    env = {k: v for k, v in os.environ.items() if k in OWN}
    env.update(HOME=str(tmp_path / "own"), USER="ann", LOGNAME="ann", TMPDIR=str(tmp_path))
    own = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "exercises/level2/test_agent.py::test_the_loop_still_finishes_the_task",
                          "--submission", str(folder)], capture_output=True, text=True, timeout=300, cwd=KIT, env=env)
    own = _signs_of(own.stdout)
    differ = {k: (graded[k], own[k]) for k in ALIKE if graded[k] != own[k]}
    assert not differ, differ
    # Set as the learner's pytest sets them (worker._settings_of_a_pytest_run), not as a bare python has them.
    assert graded["faulthandler"] and graded["gc"] == [True, [10000, 10, 10], True]
    assert graded["excepthook"] == [True, False, False] and graded["dont_write_bytecode"] is False
    # KNOWN GAPS. pytest does not run in the box's process (loading it would make each worker's start
    # about three times as long, benchmarks/worker_start.py): its output capture is missing, so stdin is
    # /dev/null, stdout and stderr are the worker's pipes (wrapped by worker._Capped, which keeps the
    # judge's share of the output), not pytest's capture files.
    assert graded["stdio_types"] == ["TextIOWrapper", "_Capped", "_Capped"] != own["stdio_types"]
    assert graded["fds"]["std"][1:] == ["pipe", "pipe"]
    # The worker is started with `python -c` (its command line names the worker and the box's folder):
    # sys.orig_argv and /proc/self/cmdline say so, where sys.argv looks like pytest's; its parent is bwrap.
    assert graded["orig_argv"][1] == graded["cmdline"][1] == "-c" != own["orig_argv"][1]
    assert graded["parent"][0] == "bwrap"
    # The box's caps are its isolation: CPU seconds, address space, file size and processes are limited.
    limits = graded["rlimits"]
    assert all(limits[n][0] != -1 for n in ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NPROC")), limits
    # A seccomp filter (the box's, and the kernel trace's strace --seccomp-bpf) with no_new_privs.
    assert graded["status"]["Seccomp"] == "2" and graded["status"]["NoNewPrivs"] == "1"
    # A cgroup namespace of its own (every line names the root), and the box's mounts.
    assert all(line.endswith(":/") for line in graded["cgroup"].splitlines()), graded["cgroup"]
    # Whose process it is: both have the grader loaded (the level's tests import it), but not the same
    # part of it. Grade's worker has grader.grading.worker and no pytest, pluggy or Hypothesis, and calls
    # the code from its own frames; the learner's pytest has pytest's and the kit's plugin, and calls
    # it from the crash engine below a test function. Each set says which process it is.
    assert "grader.grading.worker" in graded["grader_modules"] and "grader.grading.worker" not in own["grader_modules"]
    assert "grader.faces.plugin" in own["grader_modules"] and "grader.faces.plugin" not in graded["grader_modules"]
    assert graded["harness_modules"] == [] and "pytest" in own["harness_modules"]
    assert graded["callers"][1] == "grader.grading.worker" and "_pytest.runner" in own["callers"]


LINE = re.compile(r"^V w=(\S+) d=(\S+) v=(\S+) o=(\d{4})$", re.M)


def _lines(text: str) -> list:
    return LINE.findall(text)


@pytest.mark.bubblewrap  # tests/conftest.py: SYSTEM_MARKERS
def test_a_level3_fault_run_looks_like_every_other_run(tmp_path):
    """Under grade, every worker of the submission (the plain runs, each fault check's run without the
    fault and its run with it) sees the same, and the runs of one check's steps find the same notes
    from other workers in HOME, the code's folder, the temp folder and the folder above the
    checkpoints: none, but for notes left before the check began. The probe earns the 10 of the
    solution it wraps."""
    _box_or_skip()
    source = (KIT / "solutions" / "level3" / "agent.py").read_text() + LEVEL3_PROBE
    graded = _judge(tmp_path, 3, source)
    text = (graded["error"] or "") + "\n".join(t["output"] for t in graded["tests"])
    assert (graded["status"], graded["score"]) == ("passed", 10.0), text[:3000]
    out = graded["stdout"]
    assert "more characters" not in out, out[-500:]  # every line is there
    lines = _lines(out)
    assert len({w for w, _, _, _ in lines}) >= 4, out  # the plain runs and each check's runs: many workers
    assert len({v for _, _, v, _ in lines}) == 1, out  # every process sees the same
    by_folder: dict = {}
    for worker, folder, _, notes in lines:
        by_folder.setdefault(folder, set()).add((worker, notes))
    repeated = {f: runs for f, runs in by_folder.items() if len({w for w, _ in runs}) > 1}
    assert repeated, out  # some check ran its steps in more than one worker (without the fault, then with it)
    for folder, runs in repeated.items():
        assert len({notes for _, notes in runs}) == 1, (folder, runs)
    # HOME, the code's folder and /tmp start empty in every worker: no note of another worker there.
    assert all(notes[:2] + notes[3] == "000" for _, _, _, notes in lines), out


def test_the_level3_probe_sees_notes_and_changes(tmp_path):
    """The probe above is not blind: a second process whose worker differs finds the first one's notes
    in every place (all shared here, as they were under grade before each worker started afresh),
    and a view with one more variable has another digest."""
    source = (KIT / "solutions" / "level3" / "agent.py").read_text() + LEVEL3_PROBE
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "agent.py").write_text(source)
    code = f"""
import importlib.util, os
for worker, extra in (("111", None), ("222", None), ("333", "1")):
    if extra:
        os.environ["SOMETHING_NEW"] = extra
    spec = importlib.util.spec_from_file_location("probe" + worker, {str(tmp_path / "sub" / "agent.py")!r})
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    probe._worker = lambda worker=worker: worker
    probe.save_checkpoint({{"version": 1}}, {str(tmp_path / "work" / "ck")!r})
"""
    (tmp_path / "home").mkdir()
    (tmp_path / "work").mkdir()
    (tmp_path / "tmp").mkdir()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, HOME=str(tmp_path / "home"), TMPDIR=str(tmp_path / "tmp")))
    lines = _lines(done.stdout)
    assert len(lines) == 3, done.stdout + done.stderr
    assert [notes for _, _, _, notes in lines] == ["0000", "1111", "2222"]
    assert lines[0][2] == lines[1][2] != lines[2][2]


COUNTS = KIT / "tests" / "corpus" / "hostile" / "level3" / "counts_its_runs.py"


@pytest.mark.bubblewrap  # tests/conftest.py: SYSTEM_MARKERS
def test_code_that_counts_its_runs_in_files_gets_what_it_deserves_under_grade_and_its_own_pytest(tmp_path):
    """The hostile corpus's counts_its_runs swallows a failed fsync unless notes left in files (HOME, its
    folder, the temp folder, the folder above the checkpoints) say another process ran before it,
    which it takes for a later worker of the grader's, where the fault runs are. Under its own pytest
    and under grade alike, it fails the failed-fsync check alone: 9 of 10 (10 while notes outlived a
    worker)."""
    _box_or_skip()
    graded = _grade(tmp_path, 3, COUNTS.read_text())
    failed = {t["name"]: t["output"] for t in graded["tests"] if t["status"] != "passed"}
    assert list(failed) == ["test_a_failed_fsync_is_not_swallowed"], failed
    # The first fault of the check already finds it out (the file's fsync failing every time).
    first = "When fsync of the file it wrote fails, save_checkpoint must raise"
    assert failed["test_a_failed_fsync_is_not_swallowed"].startswith(first), failed
    assert "reported an I/O error, yet save_checkpoint returned" in failed["test_a_failed_fsync_is_not_swallowed"]
    assert (graded["score"], graded["max_score"]) == (9.0, 10.0)

    folder = tmp_path / "own" / "counts"
    folder.mkdir(parents=True)
    shutil.copy(COUNTS, folder / "agent.py")
    env = dict(os.environ, HOME=str(tmp_path / "own"), TMPDIR=str(tmp_path))
    own = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "exercises/level3/test_agent.py",
                          "-k", "fsync or folder_cannot", "--submission", str(folder)],
                         capture_output=True, text=True, timeout=300, cwd=KIT, env=env)
    assert "1 failed" in own.stdout and "test_a_failed_fsync_is_not_swallowed" in own.stdout, own.stdout[-3000:]
    assert first in own.stdout, own.stdout[-3000:]
