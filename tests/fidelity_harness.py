"""The differential fidelity harness: the crash engine's verdict against what real SIGKILLs leave.

For one whole submission (an agent.py of level 2, 3, 5 or 6):

1. **Predict.** The loop runs once in this process under the recorder; the crash models rebuild,
   for each crash point k, the folder a kill right after operation k leaves (M1), and the level's
   own checker reads it against what the loop had done by then (its window).
2. **Kill.** ``tests/crash_child.py`` runs the same deterministic loop in a child process and sends
   itself SIGKILL right after its k-th recorded operation, for each sampled k. What Python held in
   its buffers dies with it; the folder is left as the kernel has it.
3. **Compare.** Each folder a kill left must be byte for byte the predicted one (files at any depth),
   and the level's checker (for level 6: the submission's own loader) reads it the same way.
4. **Run again.** For the first kill that leaves a leftover (a file besides checkpoint.json), the
   loop is started again in that folder, killed at sampled points of its own run, and each folder
   is read: a second run that cannot save, or that leaves a checkpoint a resume cannot trust, is
   what the engine's RERUN check predicts.

The verdict of the kills is then set beside the engine's (M1 and the second run only: a kill
between operations cannot tear one write in the middle, and no kill cuts the power). Used by
``benchmarks/fidelity.py`` (every corpus submission, many kills) and by
``tests/test_sigkill_agreement.py`` (a fast slice).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from grader.engine.crash_models import CrashState, crash_states  # noqa: E402
from grader.engine.explore import explore_loop, record_run, windows_for  # noqa: E402
from grader.engine.invariants import check  # noqa: E402
from grader.levels import journal, parallel_calls  # noqa: E402

import crash_child  # noqa: E402

FOLDER = "checkpoints"
# A name or a byte string with a random part (uuid4, mkstemp) differs from run to run; these stand in
# for one another when a folder is compared with its prediction.
_RANDOM = re.compile(rb"[0-9a-f]{32}|(?<=tmp)[a-z0-9_]{8}|(?<=checkpoint-)[a-z0-9_]{8}")


def _plain(files: dict) -> tuple:
    """checkpoint.json's bytes and the other files' bytes (their names may be random: mkstemp, uuid)."""
    return (_RANDOM.sub(b"*", files.get("checkpoint.json") or b""), "checkpoint.json" in files,
            sorted(_RANDOM.sub(b"*", d) for n, d in files.items() if n != "checkpoint.json"))


def _same_op(said: str, op) -> bool:
    """The child's last words name the operation predicted (its kind and size; names may be random)."""
    parts = said.split()
    return len(parts) >= 6 and parts[:2] == ["KILLED", "AFTER"] and parts[2] == str(op.index) \
        and parts[3] == op.kind and parts[-1] == str(len(op.data))
# What a kill between two operations can show. (ATOMIC-DIR is about a temp file on another file
# system, where a rename is a copy: on one file system no kill can show it.)
KILLED = {"PARSE", "FIELDS", "WHOLE", "TRACE", "PAIRING", "FRESH", "COUNTS", "KEPT", "ONCE"}
RERUNS = 4  # second runs at most, from the folders the engine starts its own from (explore.RERUNS)


def corpus(levels=(2, 3, 5, 6)) -> list:
    """(level, name, path) of every corpus submission of ``levels``, plus each level's solution."""
    out = []
    for level in levels:
        out.append((level, "solution", os.path.join(ROOT, "solutions", f"level{level}", "agent.py")))
        base = os.path.join(HERE, "corpus", f"level{level}")
        for dirpath, _dirs, files in sorted(os.walk(base)):
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(dirpath, name)
                label = os.path.relpath(path, base)
                label = label[:-len("/agent.py")] if label.endswith("/agent.py") else label[:-3]
                out.append((level, label, path))
    return out


def load(path: str, name: str = "fidelity_submission"):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Rules:
    """What one level reads from a folder, and what it expects at a crash point."""

    def __init__(self, level: int, module, scratch: str):
        self.level = level
        self.scenario = crash_child.scenario_for(level, 0)
        self.reader = journal.LoaderReader(module.load_checkpoint, scratch) if level == 6 else None

    def windows(self, ops: list) -> list:
        if self.level == 5:
            return parallel_calls.parallel_windows(ops, self.scenario.task)
        return windows_for(ops, self.scenario.task)

    def finding(self, files: dict, dirs: tuple, window) -> Optional[str]:
        """The invariant a folder breaks at a crash point (None: fine), as the level's tests read it."""
        state = CrashState(0, "M1", files, dirs=dirs)
        if self.level == 6:
            found = journal.check_loaded(self.reader(state), window, {})
        elif self.level == 5:
            raw = files.get("checkpoint.json")
            found = parallel_calls.check_parallel(raw, window, {}) or parallel_calls.check_kept(raw, window, {})
        else:
            found = check(files.get("checkpoint.json"), window, {})
        return None if found is None else found.invariant

    def engine(self, run) -> set:
        """The engine's own verdict under M1, with the second runs: the invariants broken in some crash
        state (findings with no crash at all, such as a tool run twice or the returned state, are about
        the calls, not the disk, and no folder can show them)."""
        if self.level == 5:
            found = parallel_calls.explore_parallel(run, self.scenario, models=("M1",), rerun=True)
        elif self.level == 6:
            found = journal.explore_journal(run, self.reader.load, self.scenario, models=("M1",), rerun=True).crashes
        else:
            found = explore_loop(run, self.scenario, models=("M1",), rerun=True)
        return {v.invariant for v in found.violations if v.model != "none"} | (found.tripped & {"ERROR", "UNSEEN"})


def folder_left(workdir: str) -> tuple:
    """(files by relative path, subfolders) of the checkpoint folder a kill left in ``workdir``."""
    folder = os.path.join(workdir, FOLDER)
    files, dirs = {}, []
    if not os.path.isdir(folder):
        return files, ()
    for dirpath, _dirnames, filenames in os.walk(folder):
        rel = os.path.relpath(dirpath, folder)
        if rel != ".":
            dirs.append(rel)
        for name in filenames:
            with open(os.path.join(dirpath, name), "rb") as f:
                files[name if rel == "." else os.path.join(rel, name)] = f.read()
    return files, tuple(sorted(dirs))


def child_env(pycache: str) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def kill(level: int, path: str, points: list, workdir: str, env: dict, start_from: Optional[str] = None) -> dict:
    """Kill a child after each operation in ``points``; {k: (wait status, its last words)}."""
    os.makedirs(workdir, exist_ok=True)
    command = [sys.executable, "-S", os.path.join(HERE, "crash_child.py"), "file", workdir, "--level", str(level),
               "--file", path, "--kill-after", ",".join(map(str, points))]
    if start_from:
        command += ["--start-from", start_from]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    if done.returncode != 0:
        raise RuntimeError(done.stdout[-2000:] + done.stderr[-2000:])
    out = {}
    for line in done.stdout.splitlines():
        k, status, said = line.split(" ", 2)
        out[int(k)] = (int(status), said)
    return out


def sample(n: int, most: Optional[int]) -> list:
    """Crash points 1..n, all of them or ``most`` spread evenly (the last one always included)."""
    points = list(range(1, n + 1))
    if most is None or n <= most:
        return points
    step = n / most
    return sorted({points[min(n - 1, int(i * step))] for i in range(most)} | {n})


@dataclass
class Agreement:
    level: int
    name: str
    engine: set = field(default_factory=set)
    kills: int = 0
    same_folder: int = 0
    real: set = field(default_factory=set)        # invariants broken at some real kill
    rerun_kills: int = 0
    rerun_real: set = field(default_factory=set)  # what the real second runs broke
    differences: list = field(default_factory=list)
    note: str = ""

    @property
    def engine_m1(self) -> set:
        return {i for i in self.engine if i in KILLED or i in ("RERUN", "ERROR")}

    @property
    def kills_say(self) -> set:
        return (self.real & KILLED) | ({"RERUN"} if self.rerun_real & (KILLED | {"ERROR"}) else set())

    @property
    def agrees(self) -> bool:
        engine = self.engine_m1 - {"ERROR"}
        return not self.differences and bool(engine) == bool(self.kills_say)


def measure(level: int, name: str, path: str, most: Optional[int] = None, rerun_most: Optional[int] = 12,
            tmp: Optional[str] = None, reruns: int = RERUNS) -> Agreement:
    """The engine and the kills, side by side, for one submission (``most`` kills at most)."""
    result = Agreement(level, name)
    own_tmp = tmp is None
    tmp = tempfile.mkdtemp(prefix="crashcourse-fidelity-") if own_tmp else tmp
    try:
        module = load(path, f"fidelity_{level}_{abs(hash(path))}")
        rules = Rules(level, module, os.path.join(tmp, "scratch"))
        run = module.run_agent
        result.engine = set(rules.engine(run))
        if "ERROR" in result.engine or "UNSEEN" in result.engine:
            result.note = "the loop does not finish (or is not seen whole); no kill can say more"
            return result
        predict_dir = os.path.realpath(os.path.join(tmp, "predict"))
        os.makedirs(predict_dir)
        recorder, _, error, _ = record_run(run, rules.scenario, predict_dir, FOLDER, timeout=None)
        if error is not None:
            result.note = f"the recorded run failed: {error.splitlines()[0]}"
            return result
        ops = recorder.ops
        windows = rules.windows(ops)
        folder = os.path.join(predict_dir, FOLDER)
        predicted = {s.point: s for s in crash_states(ops, recorder.initial, folder, models=("M1",),
                                                       initial_dirs=recorder.initial_dirs)}
        env = child_env(os.path.join(tmp, "pycache"))
        points = sample(len(ops), most)
        # Also the kill right after the longest write to a file besides checkpoint.json: it leaves the
        # largest leftover, the one a second run is most likely to trip over.
        writes = [op for op in ops if op.kind == "write" and os.path.basename(op.path or "") != "checkpoint.json"]
        if writes:
            points = sorted(set(points) | {max(writes, key=lambda op: len(op.data)).index + 1})
        # And the points whose folders the engine starts its own second runs from (the largest
        # leftover of each kind, as grader.engine.explore.leftover_states picks them), so both sides
        # run again from the same folders.
        groups: dict = {}
        for k, state in predicted.items():
            extra = state.leftovers
            if k and extra:
                key = tuple(sorted(_RANDOM.sub(b"*", n.encode()) for n in extra))
                size = sum(map(len, extra.values()))
                if key not in groups or size > groups[key][0]:
                    groups[key] = (size, k)
        rerun_points = [k for _, k in list(groups.values())[:reruns]]
        points = sorted(set(points) | set(rerun_points))
        outcomes = kill(level, path, points, os.path.join(tmp, "kills"), env)
        for k in points:
            status, said = outcomes.get(k, (0, ""))
            where = f"kill after operation {k} ({ops[k - 1].describe()})"
            if not _same_op(said, ops[k - 1]):
                result.differences.append(f"{where}: the child's operation {k} was {said or 'never reached'}")
                continue
            result.kills += 1
            files, dirs = folder_left(os.path.join(tmp, "kills", str(k)))
            if _plain(files) == _plain(predicted[k].files):
                result.same_folder += 1
            else:
                shown = {n: len(b) for n, b in files.items()}
                expected = {n: len(b) for n, b in predicted[k].files.items()}
                result.differences.append(f"{where}: on disk {shown} (bytes per file), predicted {expected}")
            found = rules.finding(files, dirs, windows[k])
            if found:
                result.real.add(found)
        if rerun_most:
            for n, k in enumerate(k for k in rerun_points if k in outcomes):
                again(result, rules, run, path, os.path.join(tmp, "kills", str(k), FOLDER), rerun_most,
                      os.path.join(tmp, f"again-{n}"), env)
    finally:
        if own_tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return result


def again(result: Agreement, rules: Rules, run, path: str, leftover_dir: str, most: int, tmp: str, env: dict) -> None:
    """Start the loop again, for real, in a folder a kill left, and kill it at sampled points."""
    os.makedirs(tmp, exist_ok=True)
    files, dirs = folder_left(os.path.dirname(leftover_dir))
    old = rules.finding  # what the folder read as before the second run: fine to find until replaced
    before = _read_as(rules, files, dirs)
    predict_dir = os.path.realpath(os.path.join(tmp, "predict-again"))
    os.makedirs(predict_dir)

    def lay_out(folder: str) -> None:
        shutil.copytree(leftover_dir, os.path.join(predict_dir, folder), dirs_exist_ok=True)

    recorder, _, error, _ = record_run(run, rules.scenario, predict_dir, FOLDER, timeout=None, before=lay_out)
    if error is not None:
        result.rerun_real.add("ERROR")
        result.rerun_kills += 1
        return
    ops = recorder.ops
    windows = rules.windows(ops)
    # The points of the second run up to its first save into checkpoint.json (the save that meets the
    # leftover), at most ``most`` of them, and its end.
    inside = os.path.join(predict_dir, FOLDER) + os.sep
    first = next((op.index + 1 for op in ops if op.kind in ("rename", "link") and (op.dest or "").startswith(inside)),
                 None)
    if first is None:  # a journal that only appends: its first write is its first save
        first = next((op.index + 1 for op in ops if op.kind == "write" and (op.path or "").startswith(inside)),
                     len(ops))
    points = sorted(set(range(max(1, first + 1 - most), first + 1)) | {len(ops)})
    outcomes = kill(rules.level, path, points, os.path.join(tmp, "kills-again"), env, start_from=leftover_dir)
    for k, (_status, said) in outcomes.items():
        if not said.startswith("KILLED AFTER"):
            if "ERROR" in said:
                result.rerun_real.add("ERROR")
            continue
        result.rerun_kills += 1
        files, dirs = folder_left(os.path.join(tmp, "kills-again", str(k)))
        if _read_as(rules, files, dirs) == before:
            continue
        found = old(files, dirs, windows[k])
        if found:
            result.rerun_real.add(found)


def _read_as(rules: Rules, files: dict, dirs: tuple):
    if rules.reader is not None:
        return rules.reader(CrashState(0, "M1", files, dirs=dirs))
    return files.get("checkpoint.json")


def table(rows: list) -> str:
    """The agreement table, in Markdown."""
    lines = ["| level | submission | engine (M1 + second run) | kills | same folder | kills say | second-run kills | agree |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        engine = ", ".join(sorted(r.engine_m1)) or "pass"
        real = ", ".join(sorted(r.kills_say)) or "pass"
        agree = "yes" if r.agrees else "**no**"
        if r.note:
            real, agree = r.note, "n/a"
        lines.append(f"| {r.level} | {r.name} | {engine} | {r.kills} | {r.same_folder} | {real} | {r.rerun_kills} | "
                     f"{agree} |")
    return "\n".join(lines)


def from_json(row: dict) -> Agreement:
    """One row as :func:`to_json` wrote it."""
    sets = ("engine", "real", "rerun_real")
    return Agreement(**{k: set(v) if k in sets else v for k, v in row.items() if k != "agrees"})


def to_json(rows: list) -> str:
    return json.dumps([{**{k: v for k, v in vars(r).items() if not isinstance(v, set)},
                        "engine": sorted(r.engine), "real": sorted(r.real), "rerun_real": sorted(r.rerun_real),
                        "agrees": r.agrees} for r in rows], indent=1)
