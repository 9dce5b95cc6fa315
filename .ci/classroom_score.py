"""Score a workspace the way GitHub Classroom would: run each graded step of its workflow.

usage: python classroom_score.py WORKSPACE LEVEL
Prints "level N: X of Y points" and exits 0; the caller compares X with what it expects.
"""

import subprocess
import sys
from pathlib import Path

import yaml

workspace, level = Path(sys.argv[1]), int(sys.argv[2])
flow = yaml.safe_load((workspace / ".github" / "workflows" / "classroom.yml").read_text(encoding="utf-8"))
steps = [s for s in flow["jobs"]["run-autograding-tests"]["steps"]
         if s.get("uses", "").startswith("classroom-resources/autograding-command-grader")
         and s["id"].startswith(f"level{level}_")]
earned = total = 0.0
for step in steps:
    points = float(step["with"]["max-score"])
    proc = subprocess.run(step["with"]["command"], shell=True, cwd=workspace, capture_output=True, text=True,
                          timeout=60 * float(step["with"]["timeout"]))
    if proc.returncode not in (0, 1):
        sys.exit(f"{step['id']}: pytest could not run (exit {proc.returncode}):\n"
                 f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    earned += points if proc.returncode == 0 else 0.0
    total += points
print(f"level {level}: {earned:g} of {total:g} points")
