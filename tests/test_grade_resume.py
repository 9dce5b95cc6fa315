"""`crashcourse grade` resumes a stopped batch from its journal, and trusts nothing it should not.

The first half checks the journal on its own: the crash explorer runs its writers at every crash
point, and torn or foreign journals are refused or repaired as the README says. The second half
runs the real command on a small class, kills it with SIGKILL part-way (after some submissions
finished, and at a random moment), runs it again, and compares the final report with an
uninterrupted run's, counting which submissions each run started to grade.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.engine.explore import explore_writes
from grader.grading import batch_journal as bj

KIT = Path(__file__).resolve().parents[1]
ALL_MODELS = ("M1", "M2", "M3", "M4", "M5")
SETTINGS = {"level": 2, "seed": None, "timeout": 60.0, "examples": 1, "scenarios": None, "kit": "0.1.0",
            "grader": "0123456789abcdef"}


def _result(student: str, score: float, padding: int = 0) -> dict:
    return {"id": student, "score": score, "max_score": 10.0, "status": "failed" if score < 10 else "passed",
            "error": None, "tests": [{"name": "test_x", "status": "passed", "score": score, "max_score": 10.0,
                                      "output": "feedback " * padding}]}


def _journal_with(tmp_path, students: dict, padding: int = 0) -> tuple:
    """A journal holding a finished record for each ``{student: score}``, and the class folder."""
    subs = tmp_path / "subs"
    for student in students:
        (subs / student).mkdir(parents=True)
        (subs / student / "agent.py").write_text(f"# {student}\n")
    path = str(tmp_path / bj.FOLDER / "class.json.journal")
    journal = bj.BatchJournal.open(path, SETTINGS, submissions=str(subs))
    journal.split([(s, subs / s) for s in students])
    for student, score in students.items():
        journal.record(_result(student, score, padding))
    journal.close()
    return path, subs


def _entries(subs: Path) -> list:
    return [(p.name, p) for p in sorted(subs.iterdir())]


# -- the journal's writers under the crash explorer -------------------------------------------------

def test_every_crash_while_appending_a_record_leaves_the_old_records_or_one_more(tmp_path):
    path, subs = _journal_with(tmp_path, {"ada": 4.0, "bob": 10.0})
    (subs / "cy").mkdir()
    (subs / "cy" / "agent.py").write_text("# cy\n")
    journal = bj.BatchJournal.open(path, SETTINGS)
    journal.split(_entries(subs))
    # A long record: its append spans several 4 KiB pages, so M2 tears it at many places.
    crashes = explore_writes(lambda: journal.record(_result("cy", 7.0, padding=3000)), path, models=ALL_MODELS)
    journal.close()
    torn = []

    def trusted(data):
        if data is None:
            return False
        try:
            contents = bj.read(data)
        except bj.JournalRefused:
            return False
        ids = [r["id"] for r in contents.records]
        if contents.torn:
            torn.append(contents.torn)
        return ids in (["ada", "bob"], ["ada", "bob", "cy"])

    crashes.assert_each(trusted, "a journal whose whole records are the old ones, or the old ones and the new one")
    assert torn, "no crash state cut the new record short, so the torn-line rule was never exercised"
    # Once record() has returned, a power cut keeps the record: it was fsynced before the batch went on.
    final = [s for s in crashes.states if s.point == len(crashes.ops) and s.model in ("M3", "M4", "M5")]
    assert final and all(bj.read(s.read(os.path.basename(path))).records[-1]["id"] == "cy" for s in final)


def test_starting_a_fresh_journal_replaces_the_old_one_whole(tmp_path):
    path, subs = _journal_with(tmp_path, {"ada": 4.0})
    crashes = explore_writes(lambda: bj.BatchJournal.open(path, SETTINGS, fresh=True).close(), path,
                             models=ALL_MODELS)
    crashes.assert_atomic()
    assert bj.read(crashes.after).records == [] and len(bj.read(crashes.before).records) == 1


def test_cutting_off_a_torn_last_line_then_appending_is_safe_at_every_crash_point(tmp_path):
    path, subs = _journal_with(tmp_path, {"ada": 4.0, "bob": 10.0})
    whole = Path(path).read_bytes()
    Path(path).write_bytes(whole[:-40])          # a kill in the middle of bob's append
    journal = bj.BatchJournal.open(path, SETTINGS)
    assert "cut short" in journal.notes[0] and "graded again" in journal.notes[0]
    pending, resumed = journal.split(_entries(subs))
    assert [s for s, _ in pending] == ["bob"] and [r["id"] for r in resumed] == ["ada"]
    crashes = explore_writes(lambda: journal.record(_result("bob", 10.0)), path, models=ALL_MODELS)
    journal.close()
    crashes.assert_each(lambda data: data is not None and [r["id"] for r in bj.read(data).records] in
                        (["ada"], ["ada", "bob"]), "the old records, or the old ones and bob's")
    assert bj.read(Path(path).read_bytes()).torn == 0


# -- what a rerun trusts ----------------------------------------------------------------------------

def test_a_rerun_takes_finished_submissions_and_regrades_changed_ones(tmp_path):
    path, subs = _journal_with(tmp_path, {"ada": 4.0, "bob": 10.0})
    (subs / "ada" / "agent.py").write_text("# ada, fixed after the deadline\n")
    (subs / "cy").mkdir()
    (subs / "cy" / "agent.py").write_text("# cy\n")
    journal = bj.BatchJournal.open(path, SETTINGS)
    pending, resumed = journal.split(_entries(subs))
    assert [s for s, _ in pending] == ["ada", "cy"]
    assert resumed == [_result("bob", 10.0)] and journal.resumed == 1
    journal.record(_result("ada", 9.0))
    journal.close()
    # The newer record of ada replaces the older one on the next run.
    again = bj.BatchJournal.open(path, SETTINGS)
    pending, resumed = again.split(_entries(subs))
    again.close()
    assert [s for s, _ in pending] == ["cy"] and {r["id"]: r["score"] for r in resumed} == {"ada": 9.0, "bob": 10.0}


@pytest.mark.parametrize("change, words", [
    ({"level": 3}, "level was 2, now 3"),
    ({"seed": 7}, "seed was the default, now 7"),
    ({"examples": 5}, "examples was 1, now 5"),
    ({"timeout": 5.0}, "timeout was 60.0, now 5.0"),
    ({"scenarios": "ab" * 32}, "--scenarios file differs"),
    ({"grader": "fedcba9876543210"}, "grader's code or the level's tests have changed"),
])
def test_a_journal_from_other_settings_is_refused(tmp_path, change, words):
    path, _ = _journal_with(tmp_path, {"ada": 4.0})
    with pytest.raises(bj.JournalRefused) as refused:
        bj.BatchJournal.open(path, dict(SETTINGS, **change))
    message = str(refused.value)
    assert words in message and "belongs to another batch" in message and "--fresh" in message
    assert len(bj.read(Path(path).read_bytes()).records) == 1, "a refused journal must be left as it was"


def _rewrite_line(path: str, number: int, edit) -> None:
    lines = Path(path).read_bytes().split(b"\n")
    lines[number - 1] = edit(lines[number - 1])
    Path(path).write_bytes(b"\n".join(lines))


@pytest.mark.parametrize("damage, words", [
    ("score", "line 2 of the journal"),
    ("format", "journal format 2"),
    ("garbage", "not a crashcourse grade journal"),
    ("empty", "no whole header line (0 bytes)"),
    ("torn header", "no whole header line (30 bytes)"),
    ("not a record", "line 2 of the journal"),
])
def test_a_damaged_or_foreign_journal_is_refused_with_what_to_do(tmp_path, damage, words):
    path, _ = _journal_with(tmp_path, {"ada": 4.0, "bob": 10.0})
    if damage == "score":
        # A changed score with the old checksum: only the last line may be damaged by a crash.
        _rewrite_line(path, 2, lambda line: line.replace(b'"score":4.0', b'"score":10.0'))
    elif damage == "format":
        header = json.loads(Path(path).read_bytes().split(b"\n")[0].partition(b" ")[2])
        _rewrite_line(path, 1, lambda line: bj.encode(dict(header, format=2))[:-1])
    elif damage == "garbage":
        Path(path).write_bytes(bj.encode({"some": "other file"}))
    elif damage == "empty":
        Path(path).write_bytes(b"")
    elif damage == "torn header":
        Path(path).write_bytes(Path(path).read_bytes()[:30])
    else:
        _rewrite_line(path, 2, lambda line: bj.encode({"id": "ada", "files": "x"})[:-1])
    with pytest.raises(bj.JournalRefused) as refused:
        bj.BatchJournal.open(path, SETTINGS)
    assert words in str(refused.value) and "--fresh" in str(refused.value)


def test_fresh_starts_over_even_from_a_damaged_journal(tmp_path):
    path, subs = _journal_with(tmp_path, {"ada": 4.0})
    Path(path).write_bytes(b"not a journal at all\n")
    journal = bj.BatchJournal.open(path, SETTINGS, fresh=True)
    pending, resumed = journal.split(_entries(subs))
    journal.close()
    assert resumed == [] and [s for s, _ in pending] == ["ada"]


def test_two_batches_cannot_append_to_one_journal_at_once(tmp_path):
    path, _ = _journal_with(tmp_path, {"ada": 4.0})
    holder = bj.BatchJournal.open(path, SETTINGS)
    try:
        code = ("import sys; from grader.grading import batch_journal as bj\n"
                f"try: bj.BatchJournal.open({path!r}, {SETTINGS!r})\n"
                "except bj.JournalRefused as e: print(e); sys.exit(3)\n")
        other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    finally:
        holder.close()
    assert other.returncode == 3 and "another crashcourse grade is using the journal" in other.stdout


def test_a_journal_changed_behind_the_graders_back_is_noticed(tmp_path):
    path, subs = _journal_with(tmp_path, {"ada": 4.0})
    journal = bj.BatchJournal.open(path, SETTINGS)
    journal.split(_entries(subs))
    journal.record(_result("ada", 4.0))
    assert not journal.changed_by_others()
    with open(path, "ab") as f:             # what a submission able to write here could plant
        f.write(bj.encode({"id": "mallory", "files": "x", "result": _result("mallory", 10.0)}))
    assert journal.changed_by_others()
    journal.discard()
    journal.close()
    assert not os.path.exists(path)


def test_one_journal_per_batch_beside_the_submissions_whatever_the_report(tmp_path):
    assert bj.journal_path(str(tmp_path / "subs"), 3) == str(tmp_path / ".crashcourse-grade" / "subs-level3.journal")
    assert bj.journal_path(str(tmp_path / "subs") + "/", 2) == \
        str(tmp_path / ".crashcourse-grade" / "subs-level2.journal")


def test_the_progress_bar_counts_what_was_resumed(capsys):
    from grader.faces.instructor_cli import Progress

    bar = Progress(5, [{"status": "passed"}, {"status": "failed"}])
    bar.step({"status": "error"})
    bar.close()
    assert "3/5 done (2 from the journal), 1 failed, 1 could not be graded" in capsys.readouterr().err


# -- the real command, killed and run again ---------------------------------------------------------

CLASS = {  # student id: the level-2 file they handed in
    "a_solution": KIT / "solutions" / "level2" / "agent.py",
    "b_starter": KIT / "exercises" / "level2" / "agent.py",
    "c_pathlib": KIT / "tests" / "corpus" / "level2" / "c01_pathlib_replace.py",
    "d_in_place": KIT / "tests" / "corpus" / "level2" / "w01_in_place_class.py",
    "e_b_only": KIT / "tests" / "corpus" / "level2" / "w08_save_at_b_only.py",
    "f_os_open": KIT / "tests" / "corpus" / "level2" / "c03_os_open_fsync.py",
    "g_replace_in_with": KIT / "tests" / "corpus" / "level2" / "w04_replace_inside_with.py",
    "h_import_replace": KIT / "tests" / "corpus" / "level2" / "c08_from_os_import_replace.py",
    "i_no_final_save": KIT / "tests" / "corpus" / "level2" / "w16_no_final_save.py",
    "j_pathlib_in_place": KIT / "tests" / "corpus" / "level2" / "w02_pathlib_write_text_in_place.py",
    "k_rename_bytes": KIT / "tests" / "corpus" / "level2" / "c07_os_rename_write_bytes.py",
}


def _command(subs: Path, out: Path, *extra: str) -> list:
    return [sys.executable, "-m", "grader", "grade", str(subs), "--level", "2", "--examples", "1", "--jobs", "2",
            "--output", str(out), *extra]


def _start(subs: Path, out: Path, trace: Path, *extra: str) -> subprocess.Popen:
    # The batch's own TMPDIR, as the other grading tests do: it never meets another grading run.
    tmpdir = subs.parent / "grading-tmp"
    tmpdir.mkdir(exist_ok=True)
    env = dict(os.environ, CRASHCOURSE_GRADE_TRACE=str(trace), TMPDIR=str(tmpdir))
    return subprocess.Popen(_command(subs, out, *extra), cwd=KIT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _finish(proc: subprocess.Popen) -> str:
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return err


def _records(journal: Path) -> list:
    try:
        return [r["id"] for r in bj.read(journal.read_bytes()).records]
    except (OSError, bj.JournalRefused):
        return []


def _stop_when(proc: subprocess.Popen, trace: Path, journal: Path, more: int, how: int, delay: float = 0.0) -> str:
    """Stop the batch once it has started grading and ``more`` records were added to the journal
    since it started (and ``delay`` seconds after that).

    SIGKILL goes to its main process only, as an OOM kill would; SIGINT to its whole process
    group, as Ctrl-C in a terminal does. Returns what it printed on stderr."""
    target = len(_records(journal)) + more
    deadline = time.monotonic() + 240
    while (len(_records(journal)) < target or not _started(trace)) and proc.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(delay)
    assert proc.poll() is None, "the batch finished before it could be stopped; the test needs a larger class"
    if how == signal.SIGINT:
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(how)
    _, err = proc.communicate(timeout=120)
    # Its judges die with it (they watch their parent); this only tidies up after a slow one.
    time.sleep(0.2)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return err


def _started(trace: Path) -> list:
    return trace.read_text().split() if trace.exists() else []


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The class graded once, without interruption."""
    tmp = tmp_path_factory.mktemp("resume")
    subs = tmp / "subs"
    for student, source in CLASS.items():
        (subs / student).mkdir(parents=True)
        shutil.copy(source, subs / student / "agent.py")
    out = tmp / "reference" / "class.json"
    err = _finish(_start(subs, out, tmp / "reference-trace"))
    assert f"graded {len(CLASS)} submission(s)" in err
    assert sorted(_started(tmp / "reference-trace")) == sorted(CLASS)
    return {"tmp": tmp, "subs": subs, "report": json.loads(out.read_text())}


@pytest.mark.bubblewrap  # grades through crashcourse grade's box (tests/conftest.py: SYSTEM_MARKERS)
def test_a_batch_stopped_three_times_finishes_with_the_uninterrupted_report(reference):
    tmp = reference["tmp"]
    # The class under another name: one journal per batch, so this copy starts without the reference's.
    subs = tmp / "killed" / "subs"
    shutil.copytree(reference["subs"], subs)
    out = tmp / "killed" / "class.json"
    journal = tmp / "killed" / ".crashcourse-grade" / "subs-level2.journal"
    rng = random.Random(17)
    traces, trusted_before = [], []
    # A kill right after the run's first submission finished, Ctrl-C after its second, and a kill
    # at a random moment after its next one (often in the middle of grading or of an append).
    stops = [(1, signal.SIGKILL, 0.0), (2, signal.SIGINT, 0.0), (1, signal.SIGKILL, rng.uniform(0.0, 0.2))]
    for number, (more, how, delay) in enumerate(stops):
        trace = tmp / f"trace{number}"
        trusted_before.append(set(_records(journal)))
        err = _stop_when(_start(subs, out, trace), trace, journal, more, how, delay)
        traces.append(trace)
        assert not out.exists(), f"a batch stopped by signal {how} wrote a report"
        if how == signal.SIGINT:
            assert "stopped" in err and "run the same command again" in err, err[-2000:]
    assert len(set(_records(journal))) >= 4
    # A kill in the middle of an append leaves the last line cut short: do that to the journal too.
    whole = journal.read_bytes()
    journal.write_bytes(whole + bj.encode({"id": "z", "files": "x", "result": {}})[:50])
    trusted_before.append(set(_records(journal)))
    trace = tmp / "trace-final"
    err = _finish(_start(subs, out, trace))
    traces.append(trace)

    assert json.loads(out.read_text()) == reference["report"]
    assert "last line of the journal" in err and "cut short" in err
    assert f"resumed {len(trusted_before[-1])} of {len(CLASS)}" in err
    for trusted, trace in zip(trusted_before, traces):
        again = trusted & set(_started(trace))
        assert not again, f"{sorted(again)} had a finished record in the journal and were graded again"
    assert set().union(*(_started(t) for t in traces)) == set(CLASS)


@pytest.mark.bubblewrap  # grades through crashcourse grade's box (tests/conftest.py: SYSTEM_MARKERS)
def test_every_format_is_written_from_the_batchs_one_journal_without_grading_again(reference):
    """The reference run wrote JSON; asking for Markdown and CSV afterwards (two formats in one
    command, paired by a stem) takes every result from the same journal: nobody is graded twice."""
    tmp, subs = reference["tmp"], reference["subs"]
    stem = tmp / "more" / "class"
    trace = tmp / "trace-more"
    env = dict(os.environ, CRASHCOURSE_GRADE_TRACE=str(trace), TMPDIR=str(subs.parent / "grading-tmp"))
    done = subprocess.run([sys.executable, "-m", "grader", "grade", str(subs), "--level", "2", "--examples", "1",
                           "--format", "md", "--format", "csv", "--format", "json", "--output", str(stem)],
                          cwd=KIT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not _started(trace), "a report in another format graded submissions again"
    assert f"resumed {len(CLASS)} of {len(CLASS)}" in done.stderr
    assert json.loads(Path(f"{stem}.json").read_text()) == reference["report"]
    rows = Path(f"{stem}.csv").read_text().splitlines()
    assert sorted(r.split(",")[0] for r in rows[1:]) == sorted(CLASS)
    assert all(f"| {student} |" in Path(f"{stem}.md").read_text().replace("\\_", "_") for student in CLASS)


@pytest.mark.bubblewrap  # grades through crashcourse grade's box (tests/conftest.py: SYSTEM_MARKERS)
def test_other_options_are_refused_and_fresh_grades_everything_again(reference):
    """Changed files being graded again is checked above on the journal itself; here the command's
    own --fresh, with one student's file changed since the reference run."""
    tmp, subs = reference["tmp"], reference["subs"]
    out = tmp / "reference" / "class.json"
    refused = subprocess.run(_command(subs, out, "--seed", "5"), cwd=KIT, capture_output=True, text=True,
                             timeout=120, env=dict(os.environ, TMPDIR=str(subs.parent / "grading-tmp")))
    assert refused.returncode == 2 and "seed was the default, now 5" in refused.stderr and "--fresh" in refused.stderr
    assert json.loads(out.read_text()) == reference["report"], "a refused run touched the report"
    # The starter's author hands in a fixed loop (the solution's) after the batch ran.
    shutil.copy(CLASS["a_solution"], subs / "b_starter" / "agent.py")
    try:
        err = _finish(_start(subs, out, tmp / "trace-fresh", "--fresh"))
    finally:
        shutil.copy(CLASS["b_starter"], subs / "b_starter" / "agent.py")
    assert sorted(_started(tmp / "trace-fresh")) == sorted(CLASS) and f"graded {len(CLASS)} submission(s)" in err
    got = {s["id"]: s for s in json.loads(out.read_text())["submissions"]}
    want = {s["id"]: s for s in reference["report"]["submissions"]}
    assert got == dict(want, b_starter=dict(want["a_solution"], id="b_starter"))



def test_ctrl_c_while_the_grader_warms_up_stops_the_batch(tmp_path):
    """Before any judge starts, the grader collects the level's tests with pytest, which keeps a
    Ctrl-C to itself (it returns a code instead). The warm-up must pass it on, or the batch would
    carry on and write a report after the instructor asked it to stop. Here the Ctrl-C comes from
    inside the collection itself, so it lands there every time."""
    (tmp_path / "test_level.py").write_text("raise KeyboardInterrupt\n")
    code = ("import sys; from pathlib import Path; from grader.grading import batch\n"
            "try: batch.preload(Path(sys.argv[1]), None, 1)\n"
            "except KeyboardInterrupt: sys.exit(130)\n")
    warm = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=KIT, capture_output=True, text=True,
                          timeout=120)
    assert warm.returncode == 130, warm.stderr[-2000:]
