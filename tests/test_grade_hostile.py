"""``crashcourse grade`` on a folder of hostile level-2 submissions, run as an instructor would.

One batch (``--jobs 2``, short timeouts, two generated conversations per property test) grades
every file in ``tests/corpus/hostile`` plus the level's starter, then the test reads the report
and checks each submission's status, score and reason, and that nothing was left behind: no
process of the batch still alive, no file written outside its temporary folder, the submissions
folder unchanged.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.grading import reports
from grader.grading import sandbox

KIT = Path(__file__).resolve().parent.parent
CORPUS = KIT / "tests" / "corpus" / "hostile"
ESCAPES = [Path("/tmp/crashcourse-escaped.txt"), KIT / "escaped.txt"]

# id -> (status, score out of 10, words the reason must contain)
EXPECTED = {
    "good": ("passed", 10.0, None),
    "starter": ("failed", 3.0, "PARSE"),
    "syntax_error": ("error", 0.0, "syntax error on line 4"),
    "raises_at_import": ("error", 0.0, "raised RuntimeError: configuration file not found"),
    "hangs_at_import": ("error", 0.0, "importing agent.py"),
    "hangs_in_save": ("error", 0.0, "running run_agent"),
    "exits_at_import": ("error", 0.0, "called sys.exit(0)"),
    "os_exit_mid_run": ("error", 0.0, "ended while running run_agent (exit status 0)"),
    "prints_megabytes": ("passed", 10.0, None),
    "allocates_6gib": ("failed", 0.0, "MemoryError"),
    "writes_outside": ("failed", 3.0, "PARSE"),
    "fake_results": ("failed", 3.0, "PARSE"),
    "patches_pytest": ("failed", 3.0, "PARSE"),
    "detached_child": ("passed", 10.0, None),
    "nondaemon_thread": ("passed", 10.0, None),
    "reads_environment": ("passed", 10.0, None),
    "silences_recorder": ("failed", 0.0, "could not see everything your code did to the disk"),
    "empty": ("error", 0.0, "has no function `run_agent`"),
    "missing_function": ("error", 0.0, "has no function `run_agent`"),
}


def _our_processes(tmp: Path) -> list[int]:
    """Processes of this batch's sandboxes: marked, with their home under this batch's temp folder
    (another grading run on the machine has its own)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    environ = f.read()
                if sandbox.MARKER.encode() + b"=" in environ and str(tmp).encode() in environ:
                    found.append(int(entry))
            except OSError:
                pass
    return found


def _grade_dirs(tmp: Path) -> set:
    return {p.name for p in tmp.glob("crashcourse-grade-*")}


@pytest.fixture(scope="module")
def batch(tmp_path_factory, grading_env):
    folder = tmp_path_factory.mktemp("submissions")
    for name in EXPECTED:
        (folder / name).mkdir()
        source = KIT / "exercises" / "level2" / "agent.py" if name == "starter" else CORPUS / f"{name}.py"
        shutil.copy(source, folder / name / "agent.py")
    for path in ESCAPES:
        path.unlink(missing_ok=True)
    tmp = tmp_path_factory.mktemp("grading-tmp")  # this batch's own temp folder (TMPDIR)
    before_dirs = _grade_dirs(tmp)
    before = sandbox.tree_state([str(folder)])
    out = folder.parent / "report.json"
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(folder), "--level", "2", "--jobs", "2",
                           "--timeout", "6", "--examples", "2", "--output", str(out)],
                          capture_output=True, text=True, timeout=240, cwd=KIT, env=grading_env(tmp))
    assert proc.returncode == 0, proc.stderr
    return {"report": json.loads(out.read_text()), "stderr": proc.stderr, "folder": folder, "before": before,
            "before_dirs": before_dirs, "tmp": tmp}


def test_the_report_has_the_contract_shape(batch):
    report = batch["report"]
    assert report["level"] == 2
    assert sorted(s["id"] for s in report["submissions"]) == sorted(EXPECTED)
    for s in report["submissions"]:
        assert set(s) == {"id", "score", "max_score", "status", "error", "tests"}
        assert s["max_score"] == 10.0 or s["status"] == "error"
        for t in s["tests"]:
            assert set(t) == {"name", "status", "score", "max_score", "output"}
            assert t["status"] in ("passed", "failed", "error", "manual review")


@pytest.mark.parametrize("student", sorted(EXPECTED))
def test_each_submission_earns_what_its_code_earns(batch, student):
    status, score, words = EXPECTED[student]
    got = {s["id"]: s for s in batch["report"]["submissions"]}[student]
    text = (got["error"] or "") + "\n".join(t["output"] for t in got["tests"])
    assert (got["status"], got["score"]) == (status, score), text[:1500]
    if words:
        assert words in text, text[:1500]


def test_fake_results_and_patched_pytest_earn_the_starters_score(batch):
    subs = {s["id"]: s for s in batch["report"]["submissions"]}
    starter = [t["status"] for t in subs["starter"]["tests"]]
    assert [t["status"] for t in subs["fake_results"]["tests"]] == starter
    assert [t["status"] for t in subs["patches_pytest"]["tests"]] == starter


def test_nothing_is_left_behind(batch):
    assert _our_processes(batch["tmp"]) == [], "a process from the graded submissions is still running"
    assert not any(p.exists() for p in ESCAPES), "a submission wrote outside its temporary folder"
    assert sandbox.tree_changes(batch["before"], sandbox.tree_state([str(batch["folder"])])) == []
    assert _grade_dirs(batch["tmp"]) <= batch["before_dirs"], "a temporary grading folder was not removed"


def test_every_report_format_reads_back(batch, tmp_path):
    report = batch["report"]
    md = reports.to_markdown(report)
    # The JSON contract carries no check ids (its shape is fixed), so a report rebuilt from it counts
    # none: `grade --format md` reads them from the batch itself (tests/test_check_registry.py).
    assert "| (none) | 0 | |" in md and "Could not be graded" in md
    rows = reports.to_csv(report).splitlines()
    assert rows[0].startswith("id,status,score,max_score,error,test_")
    assert len(rows) == 1 + len(EXPECTED)
    written = reports.write_gradescope(report, str(tmp_path / "gs"))
    assert len(written) == len(EXPECTED)
    good = json.loads((tmp_path / "gs" / "good" / "results.json").read_text())
    assert good["score"] == 10.0
    assert all(t["status"] == "passed" for t in good["tests"] if t["max_score"])
