"""The kit's own writers, crashed at every point by the kit's own crash explorer.

Each test puts an old file in place, runs one writer under the recorder, and checks every crash
state: a kill (M1), a torn write (M2) and, because every writer fsyncs, power cuts (M3 to M5).
Each must leave the old file or the new one, whole. Writers that fsync their folder must also
keep the new file once they have returned.
"""

from __future__ import annotations

import io
import json
import os
import zipfile

import pytest

from grader.atomicfile import make_folder, write_atomic
from grader.engine.explore import explore_writes
from grader.grading import gradescope, reports

ALL_MODELS = ("M1", "M2", "M3", "M4", "M5")
POWER = ("M3", "M4", "M5")


def assert_durable(crashes) -> None:
    """A power cut right after the writer returned keeps the new file (the folder was fsynced)."""
    name = os.path.basename(crashes.path)
    after = [s for s in crashes.states if s.point == len(crashes.ops) and s.model in POWER]
    assert after, "no power-cut state after the writer returned was explored"
    lost = [f"{s.model}: {name} is {'missing' if s.read(name) is None else f'{len(s.read(name))} bytes'}"
            for s in after if s.read(name) != crashes.after]
    assert not lost, "the new file does not survive a power cut after the write returned:\n  " + "\n  ".join(lost)


def explored(fn, path, models=ALL_MODELS):
    crashes = explore_writes(fn, path, models=models)
    assert crashes.before != crashes.after, "the writer did not change the file, so nothing was tested"
    return crashes


def _batch(score: float = 7.0) -> dict:
    tests = [{"name": "test_the_loop_still_finishes_the_task", "status": "passed", "score": 1.0, "max_score": 1.0,
              "output": ""},
             {"name": "test_a_crash_mid_save_never_leaves_half_a_file", "status": "failed", "score": 0.0,
              "max_score": 3.0, "output": "PARSE broken: checkpoint.json is one complete JSON object\n" * 150}]
    return {"level": 2, "submissions": [{"id": "alice", "score": score, "max_score": 10.0, "status": "failed",
                                         "error": None, "tests": tests}], "notes": []}


# -- the writer itself -------------------------------------------------------------------------------

def test_write_atomic_leaves_the_old_file_or_the_new_one(tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("old " * 3000)
    crashes = explored(lambda: write_atomic(target, "new " * 5000), target)
    crashes.assert_atomic()
    assert_durable(crashes)
    assert target.read_text() == "new " * 5000
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"], "the temp file was left behind"


def test_write_atomic_of_a_new_file_leaves_nothing_or_all_of_it(tmp_path):
    target = tmp_path / "first.json"
    crashes = explored(lambda: write_atomic(target, b'{"x": 1}'), target)
    crashes.assert_atomic()
    assert None in crashes.versions and b'{"x": 1}' in crashes.versions
    assert_durable(crashes)


def test_the_explorer_catches_the_writers_the_kit_used_before(tmp_path):
    """The same checks fail for a report written in place and for a rename without fsyncs, so a
    pass above means something."""
    target = tmp_path / "report.json"
    target.write_text("old " * 3000)

    def in_place():
        with open(target, "w", encoding="utf-8") as f:
            json.dump({"level": 2, "submissions": ["new"] * 2000}, f)

    with pytest.raises(AssertionError, match="not the old version or the new one"):
        explored(in_place, target).assert_atomic()

    target.write_text("old " * 3000)

    def rename_without_fsync():
        tmp = tmp_path / "report.json.tmp"
        tmp.write_text("new " * 5000)
        os.replace(tmp, target)

    # Whole under a kill; after a power cut the renamed name can point at a file with no data yet.
    crashes = explored(rename_without_fsync, target, models=("M1", "M2"))
    crashes.assert_atomic()
    target.write_text("old " * 3000)
    crashes = explored(rename_without_fsync, target)
    with pytest.raises(AssertionError, match=r"M3 .*after os.replace.*0 bytes \(empty\)"):
        crashes.assert_atomic()


def test_without_durable_a_power_cut_may_bring_back_the_old_file_but_never_a_torn_one(tmp_path):
    target = tmp_path / "hints.json"
    target.write_text('{"2": {"1": 1}}')
    crashes = explored(lambda: write_atomic(target, '{"2": {"1": 2}}', durable=False), target)
    crashes.assert_atomic()
    with pytest.raises(AssertionError, match="does not survive a power cut"):
        assert_durable(crashes)


def test_the_new_file_keeps_the_old_files_permissions(tmp_path):
    target = tmp_path / "grades.csv"
    target.write_text("old")
    target.chmod(0o600)
    write_atomic(target, "new")
    assert target.stat().st_mode & 0o777 == 0o600


def test_a_link_stays_a_link_and_its_target_is_replaced_whole(tmp_path):
    real = tmp_path / "real" / "class.md"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "class.md"
    link.symlink_to(real)
    crashes = explored(lambda: write_atomic(link, "new " * 2000), real)
    crashes.assert_atomic()
    assert link.is_symlink() and real.read_text() == "new " * 2000


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path, monkeypatch):
    target = tmp_path / "report.md"
    target.write_text("old")

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError):
        write_atomic(target, "new")
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["report.md"]


def test_make_folder_makes_every_missing_folder(tmp_path):
    make_folder(tmp_path / "a" / "b" / "c")
    make_folder(tmp_path / "a" / "b" / "c")
    assert (tmp_path / "a" / "b" / "c").is_dir()


# -- every file the kit writes ------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["json", "csv", "md"])
def test_a_report_replaces_the_old_one_whole(tmp_path, fmt):
    target = tmp_path / f"class.{fmt}"
    reports.write_report(_batch(3.0), fmt, str(target))
    crashes = explored(lambda: reports.write_report(_batch(7.0), fmt, str(target)), target)
    crashes.assert_atomic()
    assert_durable(crashes)
    assert target.read_bytes().decode() == reports.render(_batch(7.0), fmt)


def test_gradescope_results_in_the_instructors_folder_are_replaced_whole(tmp_path):
    folder = tmp_path / "results"
    reports.write_gradescope(_batch(3.0), str(folder))
    target = folder / "alice" / "results.json"
    crashes = explored(lambda: reports.write_gradescope(_batch(7.0), str(folder)), target)
    crashes.assert_atomic()
    assert_durable(crashes)
    assert json.loads(target.read_text())["score"] == 7.0


def test_results_json_on_gradescopes_machine_is_replaced_whole(tmp_path):
    """``gradescope-run`` writes the one results.json Gradescope reads (the grading itself is
    replaced by a finished batch here: only the write is under test)."""
    submission = tmp_path / "submission"
    submission.mkdir()
    (submission / "agent.py").write_text("# the student's file\n")
    target = tmp_path / "results" / "results.json"
    target.parent.mkdir()
    target.write_text('{"score": 0.0, "output": "an earlier run"}')
    crashes = explored(lambda: gradescope.run_on_gradescope(2, str(submission), str(target),
                                                            grade_batch=lambda *a, **k: _batch(7.0)), target)
    crashes.assert_atomic()
    assert_durable(crashes)
    assert json.loads(target.read_text())["score"] == 7.0


def test_the_autograder_zip_is_replaced_whole(tmp_path):
    target = tmp_path / "autograder.zip"
    target.write_bytes(b"PK an earlier zip")
    crashes = explored(lambda: gradescope.build_package(2, str(target), seed=7), target, models=("M1", "M3", "M5"))
    crashes.assert_atomic()
    assert_durable(crashes)
    with zipfile.ZipFile(io.BytesIO(target.read_bytes())) as z:
        assert "run_autograder" in z.namelist() and "--private" in z.read("run_autograder").decode()


def test_the_hints_state_is_replaced_whole(tmp_path, monkeypatch, capsys):
    """``crashcourse hint`` itself, end to end: the file it keeps in .crashcourse/ is never torn."""
    from grader.faces.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    state = tmp_path / ".crashcourse" / "hints.json"
    state.parent.mkdir()
    state.write_text(json.dumps({"2": {"1": 1}, "padding": "x" * 5000}))
    crashes = explored(lambda: main(["hint", "2", "--task", "1"]), state)
    crashes.assert_atomic()
    assert json.loads(state.read_text())["2"]["1"] == 2
    assert "hint 2 of" in capsys.readouterr().out

