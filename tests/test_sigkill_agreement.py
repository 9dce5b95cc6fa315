"""The simulator against reality: a process really killed after operation K leaves M1 crash state K.

The level-2 loop runs once in this process under the recorder, and the crash models rebuild, for
every crash point, the checkpoint directory a kill there would leave (M1). Then real processes run
the same deterministic run and send themselves SIGKILL right after their K-th recorded operation,
for every K (one forked child per point, so start-up is paid once per loop). Whatever Python still
held in its buffers dies with the process. The directory each one leaves (every file's name and
bytes) must be exactly the one predicted.

Three loops: the solution as shipped, an in-place writer, and one that renames inside the ``with``
block (a kill right after that rename finds a short checkpoint on disk: the rest of the JSON was
still in Python's buffer).
"""

import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from grader.engine.crash_models import crash_states
from grader.engine.explore import record_run
from grader.engine.scripted import support_tickets

import crash_child

HERE = os.path.dirname(os.path.abspath(__file__))
VARIANTS = ("solution", "fail_in_place", "fail_replace_inside_with")
SEED = 0


def predicted(variant, tmp_path):
    """Record the run here; return (ops, {crash point: M1 directory listing})."""
    workdir = os.path.realpath(tmp_path / ("predict-" + variant))
    os.makedirs(workdir)
    recorder, _, error, _ = record_run(crash_child.loop_for(variant), support_tickets(SEED), workdir, "checkpoints",
                                       timeout=None)
    assert error is None, error
    assert not recorder.unseen, recorder.unseen
    states = {s.point: s.files for s in crash_states(recorder.ops, recorder.initial,
                                                     os.path.join(workdir, "checkpoints"), models=("M1",),
                                                     initial_dirs=recorder.initial_dirs)}
    return recorder.ops, states


def directory_left(workdir):
    folder = os.path.join(workdir, "checkpoints")
    if not os.path.isdir(folder):
        return {}
    out = {}
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), "rb") as f:
            out[name] = f.read()
    return out


def parses(data):
    try:
        json.loads(data)
    except ValueError:
        return False
    return True


def child_env(tmp_path):
    """Let the children share compiled byte code in a private cache (this machine disables .pyc files)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path / "pycache")
    return env


def kill_children(variant, points, workdir, env):
    """One process per loop forks one child per crash point; returns {k: (wait status, last words)}."""
    os.makedirs(workdir)
    # -S: no site-packages to scan at start-up; the child needs only the standard library and grader/.
    done = subprocess.run([sys.executable, "-S", os.path.join(HERE, "crash_child.py"), variant, workdir,
                           "--kill-after", ",".join(map(str, points)), "--seed", str(SEED)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    out = {}
    for line in done.stdout.splitlines():
        k, status, said = line.split(" ", 2)
        out[int(k)] = (int(status), said)
    return out


def test_a_real_kill_leaves_the_predicted_crash_state(tmp_path):
    predictions = {variant: predicted(variant, tmp_path) for variant in VARIANTS}
    # Every crash point of every loop: a kill after operation k, for k = 1 .. the last.
    jobs = {variant: list(range(1, len(ops) + 1)) for variant, (ops, _) in predictions.items()}
    total = sum(map(len, jobs.values()))
    assert total >= 50
    env = child_env(tmp_path)
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = {v: pool.submit(kill_children, v, points, str(tmp_path / v), env) for v, points in jobs.items()}
        outcomes = {v: f.result() for v, f in futures.items()}

    problems = []
    torn_seen = 0
    for variant, points in jobs.items():
        ops, states = predictions[variant]
        for k in points:
            status, said = outcomes[variant][k]
            where = f"{variant}, killed after operation {k} ({ops[k - 1].describe()})"
            if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
                problems.append(f"{where}: the child was not killed (wait status {status})")
                continue
            if said != f"KILLED AFTER {crash_child.op_line(ops[k - 1])}":
                problems.append(f"{where}: the child's operation {k} was not the predicted one: {said}")
                continue
            left = directory_left(str(tmp_path / variant / str(k)))
            if left != states[k]:
                shown = {n: len(b) for n, b in left.items()}
                expected = {n: len(b) for n, b in states[k].items()}
                problems.append(f"{where}: on disk {shown} (bytes per file), predicted {expected}")
            if variant == "fail_replace_inside_with" and ops[k - 1].kind == "rename":
                torn_seen += not parses(left.get("checkpoint.json", b""))
    assert not problems, f"{len(problems)} of {total} kills disagree with the simulator:\n" + "\n".join(problems[:20])
    # Killed right after each rename inside the with block, the checkpoint must not parse: the tail
    # of the JSON died in Python's buffer. The simulator predicted it; the kill confirms it.
    renames = sum(1 for op in predictions["fail_replace_inside_with"][0] if op.kind == "rename")
    assert torn_seen == renames >= 3, f"{torn_seen} of {renames} kills after a rename found a short checkpoint"


# -- the differential harness, a fast slice (benchmarks/fidelity.py runs the whole corpus) -----------

import fidelity_harness  # noqa: E402

SLICE = {
    # (level, corpus path): what the engine and the kills must both say
    (2, "level2/w25_hard_link_kept_then_rewritten.py"): {"PARSE"},   # a link kept, rewritten in place
    (2, "level2/c10_o_tmpfile_then_linkat.py"): set(),               # O_TMPFILE + linkat is a save
    (2, "level2/w23_temp_in_append_mode.py"): {"RERUN"},             # the next run appends to a torn temp
    (6, "level6/right/journal_in_wal_subfolder.py"): set(),          # files at any depth
}


def test_a_slice_of_the_corpus_agrees_with_real_kills(tmp_path):
    def one(item):
        (level, rel), want = item
        work = tmp_path / rel.replace("/", "_")
        work.mkdir()
        return item, fidelity_harness.measure(level, rel, os.path.join(HERE, "corpus", rel), most=5, rerun_most=4,
                                              reruns=1, tmp=str(work))
    results = [one(item) for item in SLICE.items()]  # one at a time: a recorded run changes the working folder
    for ((_level, rel), want), row in results:
        assert row.kills >= 5 and row.same_folder == row.kills, (rel, row.differences[:5])
        assert row.engine_m1 == want, (rel, row.engine)
        assert row.agrees, (rel, row.engine_m1, row.kills_say, row.differences[:5])
