"""One source of truth: under ``crashcourse grade`` what happened on disk is what the kernel saw
(grader.grading.kernel_trace), and the recorder only labels it.

``tests/corpus/kernel`` holds two kinds of submission, graded in one batch per level:

- correct code written every way a learner might (pathlib in a class, tempfile, os.open with
  writev or pwrite, a folder's descriptor with dir_fd=, oddly spelled paths, fsyncs on a worker
  thread, the folder opened twice per save or before the write): full marks under ``grade`` AND
  under the learner's own pytest. Level 2's rename inside the ``with`` block (a real mistake)
  gets the same 6 of 10 from both, not 0 for a "forgery". A save made in a forked child (os.fork,
  multiprocessing) is held the same way; a save made by another program (`mv`) is judged by the
  kernel's account under grade, and a learner's pytest, which cannot follow it, says so (APART).
- hostile code: a wrong loop that edits what the recorder wrote down (the same file named another
  way, through dir_fd=, outside the watched folder, an fsync of another file credited to the temp
  file). Each has an honest twin (``FORGE = False``), graded in the same batch: the forgery earns
  exactly what the twin earns, which is less than full marks, or, where it claims an operation the
  kernel never saw (a rename, an ``os.sync()``), is refused as forged and earns nothing.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.engine import recorder
from grader.grading import bubblewrap, kernel_trace

KIT = Path(__file__).resolve().parent.parent
CORPUS = KIT / "tests" / "corpus" / "kernel"
W04 = KIT / "tests" / "corpus" / "level2" / "w04_replace_inside_with.py"

pytestmark = [pytest.mark.strace, pytest.mark.bubblewrap,
              pytest.mark.skipif(kernel_trace.problem() is not None or bubblewrap.check() is not None,
                                 reason="needs strace and a bubblewrap box")]


def _cases(level: int) -> dict:
    """name -> source file, for the level's kernel corpus (level 2 also holds w04)."""
    out = {p.stem: p for p in sorted((CORPUS / f"level{level}").glob("*.py"))}
    if level == 2:
        out["w04_replace_inside_with"] = W04
    return out


def _verdict(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return doc.splitlines()[0]


def _grade(folder: Path, level: int, report: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "grader", "grade", str(folder), "--level", str(level),
                           "--examples", "1", "--output", str(report), "--fresh"],
                          capture_output=True, text=True, cwd=KIT, timeout=900)
    assert report.exists(), done.stderr[-3000:]
    return {s["id"]: s for s in json.loads(report.read_text())["submissions"]}


def _pytest_score(folder: Path, level: int) -> tuple:
    """(points earned, points in all) of the learner's own pytest run on ``folder``."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"exercises/level{level}",
                           "--submission", str(folder)], capture_output=True, text=True, cwd=KIT, timeout=600)
    found = re.search(r"(\d+(?:\.\d+)?) of (\d+(?:\.\d+)?) points", done.stdout)
    assert found, done.stdout[-2000:]
    return float(found.group(1)), float(found.group(2))


# Code whose writes reach the disk through another program: grade's kernel trace follows it, a learner's
# own pytest (a recorder inside Python) cannot. name -> (grade's score, pytest's score). The two differ
# by design where the kernel's account says more; pytest then says what it could not see.
APART = {
    "another_program_renames_the_temp": (10.0, 0.0),
    # cp's bytes are copied inside the kernel (copy_file_range): strace prints none, but the trace
    # wrote the source itself, so the judge knows them; its true verdict, in place, is 6 of 10.
    "another_program_copies_in_place": (6.0, 0.0),
}


@pytest.fixture(scope="module", params=[2, 3])
def graded(request, tmp_path_factory):
    level = request.param
    tmp = tmp_path_factory.mktemp(f"kernel{level}")
    subs = tmp / "subs"
    for name, source in _cases(level).items():
        (subs / name).mkdir(parents=True)
        text = source.read_text(encoding="utf-8")
        (subs / name / "agent.py").write_text(text, encoding="utf-8")
        if "\nFORGE = True\n" in text:
            (subs / f"{name}_twin").mkdir()
            (subs / f"{name}_twin" / "agent.py").write_text(text.replace("\nFORGE = True\n", "\nFORGE = False\n"),
                                                            encoding="utf-8")
    return level, subs, _grade(subs, level, tmp / "report.json")


def _failures(submission: dict) -> str:
    return "\n".join(f"{t['name']}: {t['output'][:700]}" for t in submission["tests"]
                     if t["status"] not in ("passed", "manual review"))


def test_correct_code_earns_full_marks_under_grade_and_its_own_pytest(graded):
    level, subs, report = graded
    right = [name for name, path in _cases(level).items() if _verdict(path).startswith("VERDICT: pass")]
    if not right:
        pytest.skip(f"no correct-code case for level {level} yet")
    for name in right:
        if name in APART:
            continue
        got = report[name]
        assert got["score"] == got["max_score"] > 0, (name, _failures(got))
        earned, total = _pytest_score(subs / name, level)
        assert earned == total == got["max_score"], name


def test_a_rename_inside_the_with_block_earns_the_same_under_grade_as_under_pytest(graded):
    level, subs, report = graded
    if level != 2:
        pytest.skip("a level-2 case")
    got = report["w04_replace_inside_with"]
    assert (got["score"], _pytest_score(subs / "w04_replace_inside_with", 2)[0]) == (6.0, 6.0), _failures(got)
    assert kernel_trace.MISMATCH not in _failures(got)
    assert "renamed checkpoint.json.tmp over checkpoint.json while its" in _failures(got)


def test_a_forged_account_earns_what_the_same_code_earns_honestly(graded):
    level, subs, report = graded
    twins = [name for name in report if name.endswith("_twin")]
    assert twins
    for twin in twins:
        forged, honest = report[twin[:-len("_twin")]], report[twin]
        assert honest["score"] < honest["max_score"], (twin, "the honest twin is a wrong loop")
        assert kernel_trace.MISMATCH not in _failures(honest)
        # Relabelled operations earn the twin's score; a claimed one the kernel never saw is refused.
        if forged["score"] != honest["score"]:
            assert forged["score"] == 0.0 and "which the kernel never saw" in _failures(forged), twin


def test_operations_the_kernel_never_saw_are_refused_as_forged(graded):
    level, subs, report = graded
    if level != 2:
        pytest.skip("a level-2 case")
    got = report["forges_fake_events"]
    assert got["score"] == 0.0
    assert f"{kernel_trace.MISMATCH}: the recorded operations include os.sync()" in _failures(got)


def test_a_link_the_box_refuses_is_told_as_its_own_pytest_tells_it(graded):
    """A save that swaps a relative symbolic link into place: the crash models do not follow links, so
    pytest refuses the run, naming the link; in the box os.symlink raises PermissionError (links are
    refused there, before the tracer sees the call). grade tells the same link first, with why the run
    stopped, rather than blaming the code for the PermissionError. Both score it 0."""
    level, subs, report = graded
    if level != 2:
        pytest.skip("a level-2 case")
    name = "link_swapped_into_place"
    got, text = report[name], _failures(report[name])
    first = text.split("\n", 1)[0]
    link = "os.symlink('save-000000.json', 'run data/check points/checkpoint.json.new'), a symbolic link: " \
        "the crash models do not follow links"
    assert got["score"] == 0.0 and link in text and recorder.BOX_REFUSED_LINK in text, text[:2000]
    assert "could not see everything your code did to the disk" in first and "did not finish" not in text, text[:2000]
    own = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "exercises/level2",
                          "--submission", str(subs / name)], capture_output=True, text=True, cwd=KIT, timeout=600)
    assert "crashcourse: 0 of 10 points" in own.stdout and link in own.stdout, own.stdout[-3000:]
    failing = sorted(set(re.findall(r"^FAILED \S+::(\w+)", own.stdout, re.M)))
    assert failing == sorted(t["name"] for t in got["tests"] if t["status"] != "passed"), own.stdout[-3000:]


def test_writes_by_another_program_are_judged_from_the_kernel_and_pytest_says_it_cannot(graded):
    level, subs, report = graded
    if level != 2:
        pytest.skip("level-2 cases")
    for name, (grade_score, pytest_score) in APART.items():
        got = report[name]
        assert got["score"] == grade_score, (name, _failures(got))
        own = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "exercises/level2",
                              "--submission", str(subs / name)], capture_output=True, text=True, cwd=KIT, timeout=600)
        assert f"crashcourse: {pytest_score:g} of 10 points" in own.stdout, (name, own.stdout[-3000:])
        # What it could not see (another program, and what it left on disk), and who judges it from the kernel.
        for words in ("started another program", "a route the recorder does not see", "crashcourse grade",
                      "the kernel's own account"):
            assert words in own.stdout, (name, words, own.stdout[-3000:])


# Copies made inside the kernel from a file the code wrote itself (os.sendfile, os.copy_file_range; cp
# above): strace prints none of their bytes, the trace's own account of the source gives them.
# name -> the score both faces give (the correct ones, into a temp file, are among the VERDICT: pass).
IN_KERNEL = {"sendfile_over_the_checkpoint": 6.0}


def test_a_copy_made_inside_the_kernel_is_judged_by_the_bytes_it_moved(graded):
    level, subs, report = graded
    if level != 2:
        pytest.skip("level-2 cases")
    for name, score in IN_KERNEL.items():
        got = report[name]
        assert got["score"] == score and kernel_trace.MISMATCH not in _failures(got), (name, _failures(got))
        assert "PARSE" in _failures(got), (name, _failures(got))
        assert _pytest_score(subs / name, level)[0] == score, name


def test_the_corpus_is_what_the_test_says(graded):
    """Every file's first docstring line says what it is: a VERDICT for correct code, or Hostile."""
    level, _, _ = graded
    for name, path in _cases(level).items():
        assert _verdict(path).startswith(("VERDICT: pass", "VERDICT: fail", "Hostile")), name
    assert shutil.which("strace")
