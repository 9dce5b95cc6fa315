"""Run the level-2 loop for real, under the recorder, and optionally SIGKILL this process mid-run.

Used by the kit's agreement tests, never by learners::

    python tests/crash_child.py VARIANT WORKDIR [--kill-after K,K,...] [--seed N] [--trace FILE]
    python tests/crash_child.py file WORKDIR --level N --file AGENT.PY [--start-from FOLDER] [--kill-after ...]

VARIANT is ``solution`` (the level-2 solution as shipped) or the name of a file in
``corpus/save_checkpoint/`` whose ``save_checkpoint`` replaces the solution's; ``file`` runs a
whole agent.py of level N (2, 3, 5 or 6) on that level's scripted task. The loop runs in
WORKDIR/checkpoints; with ``--start-from`` that folder first gets a copy of FOLDER (what an
earlier, killed run left), so the run is the second one after a crash.

With ``--kill-after``, for each K this process forks a child (imports are paid once), and the
child runs the loop in WORKDIR/K/checkpoints and kills itself with SIGKILL the moment the recorder
has logged operation number K (the first K operations happened, the rest never did), after
printing that operation; nothing it held in Python's buffers gets to the disk. One line per K goes
to stdout: ``K <wait status> KILLED AFTER <operation>``.

With ``--trace FILE`` the recorded operations are written to FILE as JSON after an uncrashed run.
"""

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from grader.engine import recorder as recorder_module  # noqa: E402
from grader.engine.explore import record_run  # noqa: E402
from grader.engine.loader import import_file  # noqa: E402
from grader.engine.scripted import support_tickets  # noqa: E402

SOLUTION = os.path.join(ROOT, "solutions", "level2", "agent.py")
CORPUS = os.path.join(HERE, "corpus", "save_checkpoint")


def scenario_for(level, seed):
    """The scripted task a level's tests run its loop on (level 5: several calls per turn)."""
    if level == 5:
        from grader.levels.parallel_calls import parallel_tickets
        return parallel_tickets(seed)
    return support_tickets(seed)


def load(path, name):
    return import_file(path, name=name)


def loop_for(variant):
    agent = load(SOLUTION, "agent_under_test")
    if variant != "solution":
        agent.save_checkpoint = load(os.path.join(CORPUS, variant + ".py"), "variant").save_checkpoint
    return agent.run_agent


def op_line(op):
    """One operation as both sides print it, to check the two runs line up."""
    name = os.path.basename(op.path) if op.path else "-"
    return f"{op.index} {op.kind} {name} {len(op.data)}"


def kill_after(k, report_fd):
    real_write = recorder_module.real_os("write")
    add = recorder_module.Recorder.add

    def add_then_maybe_die(self, kind, **fields):
        op = add(self, kind, **fields)
        if len(self.ops) == k:
            real_write(report_fd, ("KILLED AFTER " + op_line(op)).encode())
            os.kill(os.getpid(), signal.SIGKILL)
        return op
    recorder_module.Recorder.add = add_then_maybe_die


def run_killed(run, k, workdir, seed, scenario=None, start_from=None):
    """Fork; the child runs the loop until operation k and dies by SIGKILL. Returns (status, its last words)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_end)
        try:
            kill_after(k, write_end)
            os.makedirs(workdir)
            lay_out = None
            if start_from:
                def lay_out(folder):
                    shutil.copytree(start_from, folder, dirs_exist_ok=True)
            _, _, error, _ = record_run(run, scenario or support_tickets(seed), workdir, "checkpoints", timeout=None,
                                        before=lay_out)
            if error:
                os.write(write_end, ("ERROR " + error.splitlines()[0]).encode())
        finally:
            os._exit(3)  # the run ended (or failed) before operation k
    os.close(write_end)
    said = b""
    while True:
        chunk = os.read(read_end, 4096)
        if not chunk:
            break
        said += chunk
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    return status, said.decode()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("variant")
    parser.add_argument("workdir")
    parser.add_argument("--kill-after", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trace", default=None)
    parser.add_argument("--level", type=int, default=2)
    parser.add_argument("--file", default=None)
    parser.add_argument("--start-from", default=None)
    args = parser.parse_args()
    run = load(args.file, "agent_under_test").run_agent if args.variant == "file" else loop_for(args.variant)
    # tempfile tries out the system temp folder the first time it is used (it writes a probe file);
    # the predicting process has done so long before, so do it here too, before any operation counts.
    tempfile.gettempdir()
    scenario = scenario_for(args.level, args.seed)
    workdir = os.path.realpath(args.workdir)
    if args.kill_after is not None:
        for k in (int(x) for x in args.kill_after.split(",")):
            status, said = run_killed(run, k, os.path.join(workdir, str(k)), args.seed, scenario, args.start_from)
            print(k, status, said.replace("\n", " "), flush=True)
        return 0
    recorder, _, error, _ = record_run(run, support_tickets(args.seed), workdir, "checkpoints", timeout=None)
    if error:
        print(error, file=sys.stderr)
        return 2
    if args.trace:
        with open(args.trace, "w", encoding="utf-8") as f:
            json.dump([{"index": op.index, "kind": op.kind, "api": op.api, "path": op.path, "dest": op.dest,
                        "size": len(op.data), "offset": op.offset, "is_dir": op.is_dir} for op in recorder.ops], f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
