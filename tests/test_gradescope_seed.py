"""Without a box, the instructor's seed stays out of reach of the code it grades (Gradescope's image).

On Gradescope the code runs as root in the container the grader runs in, and Docker's seccomp
profile may refuse the namespaces a box needs. There the seed cannot be hidden by permissions: the
package keeps it off ``run_autograder``'s command line, in ``private.json``, which ``gradescope-run``
reads and removes before any submission's code runs; and it is 64 bits drawn from the instructor's
number and a random salt, so code that draws the kit's conversations cannot search for it.

The test unzips a package built with ``--seed 7``, makes bubblewrap refuse (as such a container
does), and runs its ``run_autograder`` (moved under a temporary folder) on a working loop that
looks for the seed everywhere it can: the package's files, and every command line and environment
it can read (it is told the number to look for: the test's oracle, not something code could know).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader.grading import gradescope

KIT = Path(__file__).resolve().parent.parent

SOLUTION = (KIT / "solutions" / "level2" / "agent.py").read_text()
HUNTER = """

import glob as _glob
import os as _os

_real_run = run_agent


def _ancestors():
    pids, pid = set(), _os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            with open(f"/proc/{{pid}}/stat", "rb") as f:
                pid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def _hunt():
    # The seed's value anywhere; the words --seed on the command lines of this run's own processes
    # (other jobs on a shared machine may use the option for their own ends).
    found, mine = [], _ancestors()
    for path in [{private!r}, {script!r}] + _glob.glob("/proc/[0-9]*/cmdline") + _glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(path, "rb") as f:
                text = f.read()
        except OSError:
            continue
        if path == {private!r}:
            found.append("private.json is still there")
        ours = not path.startswith("/proc/") or int(path.split("/")[2]) in mine
        if {seed!r}.encode() in text or (ours and b"--seed" in text):
            found.append(path)
    return found


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    found = _hunt()
    if found:
        raise RuntimeError("LEAK: " + " | ".join(found))
    return _real_run(task, tools, call_model, execute_tool, directory)
"""


def test_a_packaged_seed_is_drawn_from_a_large_space_and_kept_off_the_command_line(tmp_path):
    seeds = []
    for n in range(2):
        out = gradescope.build_package(2, str(tmp_path / f"ag{n}.zip"), seed=7)
        with zipfile.ZipFile(out) as z:
            assert "--seed" not in z.read("run_autograder").decode()
        seeds.append(gradescope.packaged_seed(out))
    # Salted: two packages of one --seed grade with two seeds, neither of them 7 nor small.
    assert seeds[0] != seeds[1] and min(seeds) > 2 ** 20
    assert gradescope.packaged_seed(gradescope.build_package(2, str(tmp_path / "plain.zip"))) is None


def test_without_a_box_the_code_finds_the_seed_nowhere(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("Gradescope runs the grader as root; as another user the file's mode hides it anyway")
    zipped = gradescope.build_package(2, str(tmp_path / "ag.zip"), seed=7)
    seed = gradescope.packaged_seed(zipped)
    source = tmp_path / "source"
    with zipfile.ZipFile(zipped) as z:
        z.extractall(source)
    root = tmp_path / "autograder"
    (root / "results").mkdir(parents=True)
    (root / "submission").mkdir()
    (root / "submission" / "agent.py").write_text(SOLUTION + HUNTER.format(
        private=str(source / "private.json"), script=str(root / "run_autograder"), seed=str(seed)))
    script = (source / "run_autograder").read_text().replace("/autograder/venv/bin/python", sys.executable)
    script = script.replace("/autograder/source", str(source)).replace("/autograder", str(root))
    (root / "run_autograder").write_text(script)
    fake = tmp_path / "bin"  # bubblewrap refuses, as under Docker's default seccomp profile
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}", TMPDIR=str(tmp_path))
    done = subprocess.run(["bash", str(root / "run_autograder")], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((root / "results" / "results.json").read_text())
    text = json.dumps(result)
    assert "LEAK" not in text, text[:3000]
    assert result["score"] == 10.0, result["output"]
    assert "NOT TAMPER-PROOF" in result["output"] and "removed before the code ran" in result["output"]
    assert not (source / "private.json").exists()
    assert str(seed) not in text
    # Run again in the same container, the package has no seed left: it says so, and grades nothing.
    again = subprocess.run(["bash", str(root / "run_autograder")], capture_output=True, text=True, timeout=120,
                           env=env)
    assert again.returncode != 0 and "removed once read" in again.stderr
