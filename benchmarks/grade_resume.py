"""An instructor's trial of a stopped batch: grade a class, kill it at random moments, run it again.

    python benchmarks/grade_resume.py [--count 200] [--kills 4] [--jobs 2] [--examples N] [--seed 17]

It grades the class once without interruption (the reference), then grades it again into another
report, SIGKILLing the batch ``--kills`` times at random moments spread over the batch (once a
random number of submissions have finished, plus a random fraction of a second) and running the
same command until it completes. It prints, and checks:

* the final report equals the reference (but for a timing and a random folder name that some
  failure messages quote, which differ between two uninterrupted runs too: see ``_normal``);
* no submission whose record was in the journal when a run started was graded by that run
  (judge starts are counted with ``CRASHCOURSE_GRADE_TRACE``);
* how many submissions were graded more than once in all (only those whose grading was in flight
  when a kill came), and what the interruptions cost in time against the uninterrupted run.

The class cycles through the level-2 solution, the starter and the corpus variants, except the four
that name their temp files at random: their feedback quotes those names, which differ from run to
run, so two uninterrupted runs would not match byte for byte either. Exits 1 if a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import shutil
import tempfile
import time
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(KIT))

from grader.grading import batch_journal  # noqa: E402

RANDOM_NAMES = {"c02_named_temporary_file", "c04_mkstemp_fdopen", "w06_tmp_in_system_tmp", "w07_mkstemp_default_dir"}
SOURCES = [KIT / "solutions" / "level2" / "agent.py", KIT / "exercises" / "level2" / "agent.py"] + \
    [p for p in sorted((KIT / "tests" / "corpus" / "level2").glob("*.py")) if p.stem not in RANDOM_NAMES]


def make_class(folder: Path, count: int) -> None:
    for i in range(count):
        source = SOURCES[i % len(SOURCES)]
        (folder / f"student{i:03d}").mkdir(parents=True)
        (folder / f"student{i:03d}" / "agent.py").write_text(source.read_text() + f"\n# submission {i}\n")


def command(subs: Path, out: Path, args) -> list:
    cmd = [sys.executable, "-m", "grader", "grade", str(subs), "--level", "2", "--jobs", str(args.jobs),
           "--output", str(out)]
    return cmd + (["--examples", str(args.examples)] if args.examples else [])


def records(journal: Path) -> list:
    try:
        return [r["id"] for r in batch_journal.read(journal.read_bytes()).records]
    except (OSError, batch_journal.JournalRefused):
        return []


def run(cmd: list, trace: Path, kill_after: float = None, journal: Path = None, at_least: int = 0) -> tuple:
    """Run the batch; with ``kill_after``, SIGKILL it that many seconds after ``at_least`` records are in."""
    env = dict(os.environ, CRASHCOURSE_GRADE_TRACE=str(trace))
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=KIT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    killed = False
    if kill_after is not None:
        while len(records(journal)) < at_least and proc.poll() is None:
            time.sleep(0.02)
        end = time.monotonic() + kill_after
        while time.monotonic() < end and proc.poll() is None:
            time.sleep(0.01)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed = True
    _, err = proc.communicate()
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # a judge slow to notice its parent died
    except ProcessLookupError:
        pass
    return time.perf_counter() - started, killed, proc.returncode, err


def _normal(report: str) -> dict:
    """The report without the two things in its feedback that change from run to run.

    A failed assertion on an exploration (the "loop still finishes" check of a loop that never
    clears pendingToolUse, for example) prints pytest's repr of it, cut to a length, and the repr
    includes how long the exploration took. A temp file written outside the checkpoint's folder is
    named with the grader's own random working folder. Two uninterrupted runs differ there too, so
    neither says anything about resuming."""
    data = json.loads(report)
    for submission in data["submissions"]:
        for test in submission["tests"]:
            text = re.sub(r"Exploration\(.*", "Exploration(...)", test["output"])
            test["output"] = re.sub(r"crashcourse-[a-z0-9_]{8}\b", "crashcourse-XXXXXXXX", text)
    return data


def show_difference(reference: Path, got: Path) -> None:
    import difflib

    want = {s["id"]: s for s in _normal(reference.read_text())["submissions"]}
    have = {s["id"]: s for s in _normal(got.read_text())["submissions"]}
    for student in sorted(set(want) | set(have)):
        if want.get(student) != have.get(student):
            print(f"    {student} differs:")
            a = json.dumps(want.get(student), indent=1).splitlines()
            b = json.dumps(have.get(student), indent=1).splitlines()
            for line in list(difflib.unified_diff(a, b, lineterm="", n=0))[2:12]:
                print("      " + line[:200])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--kills", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--examples", type=int, default=None)
    parser.add_argument("--seed", type=int, default=17, help="seed of the random kill moments")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    ok = True
    with tempfile.TemporaryDirectory(prefix="crashcourse-resume-bench-") as tmp:
        tmp = Path(tmp)
        subs = tmp / "class"
        make_class(subs, args.count)
        print(f"{args.count} level-2 submissions, --jobs {args.jobs}, {args.kills} kill(s) at random moments")

        seconds, _, code, err = run(command(subs, tmp / "reference" / "class.json", args), tmp / "trace-ref")
        if code != 0:
            print(err)
            return 1
        reference = seconds
        print(f"  uninterrupted: {seconds:6.1f} s")

        # The same class again under another name: one journal per batch, so the copy starts with none.
        subs = tmp / "stopped" / "class"
        shutil.copytree(tmp / "class", subs)
        out = tmp / "stopped" / "class.json"
        journal = Path(batch_journal.journal_path(str(subs), 2))
        total, starts, regraded_trusted, runs = 0.0, [], 0, 0
        # Kills spread over the whole batch: once a random number of submissions have finished
        # (each more than the last), plus a random fraction of a second.
        marks = sorted(rng.sample(range(1, args.count), min(args.kills, args.count - 1)))
        while True:
            trusted = set(records(journal))
            trace = tmp / f"trace{runs}"
            kill = runs < len(marks)
            seconds, killed, code, err = run(command(subs, out, args), trace,
                                             kill_after=rng.uniform(0.0, 1.0) if kill else None, journal=journal,
                                             at_least=max(marks[runs], len(trusted) + 1) if kill else 0)
            runs += 1
            total += seconds
            started = trace.read_text().split() if trace.exists() else []
            starts += started
            again = trusted & set(started)
            regraded_trusted += len(again)
            state = "killed" if killed else f"exit {code}"
            print(f"  run {runs}: {seconds:6.1f} s, {state:7}, journal held {len(trusted):3} at the start, "
                  f"graded {len(started):3}" + (f", REGRADED {sorted(again)[:5]}" if again else ""))
            if not killed:
                if code != 0:
                    print(err)
                    return 1
                break
        same = _normal(out.read_text()) == _normal((tmp / "reference" / "class.json").read_text())
        twice = len(starts) - len(set(starts))
        print(f"  in all: {total:6.1f} s over {runs} runs ({total / reference:.2f}x the uninterrupted run); "
              f"{len(starts)} judge starts for {args.count} submissions, {twice} graded twice (in flight at a kill)")
        print(f"  final report equals the uninterrupted one: {'yes' if same else 'NO'}")
        if not same:
            show_difference(tmp / "reference" / "class.json", out)
        print(f"  submissions with a record that were graded again: {regraded_trusted}")
        ok = same and regraded_trusted == 0 and set(starts) == {f"student{i:03d}" for i in range(args.count)}
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
