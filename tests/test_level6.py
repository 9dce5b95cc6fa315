"""Level 6 as a whole: bytes are counted exactly, crash states are read through the learner's loader,
the corpus is graded right, the starter is red only for its bytes and the solution green.

The corpus in tests/corpus/level6 is graded in-process with the engine call the exercise's tests
make (explore_journal). Long runs here are 100 turns, not the exercise's 200, to keep the kit's
own suite quick; the verdicts are the same (a whole-history save is about 100 times over at turn
100, and the limit is 10). One end-to-end run of the exercise's tests goes through pytest.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from grader.levels.journal import (AMPLIFICATION_LIMIT, ByteReport, LoaderFailure, LoaderReader, bytes_by_turn,
                            check_loaded, explore_journal, history_sizes, long_conversation, sampled_points,
                            shared_reference_saves)
from grader.engine.explore import ABSOLUTE_FOLDER, NESTED_FOLDER
from grader.engine.crash_models import CrashState
from grader.engine.recorder import Op
from grader.engine.scripted import from_turns, support_tickets
from grader.engine import fresh, hangs
from grader.engine.hangs import LoopTimeout
from grader.engine.loader import import_file

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(__file__).resolve().parent / "corpus" / "level6"
SOLUTION = ROOT / "solutions" / "level6" / "agent.py"
STARTER = ROOT / "exercises" / "level6" / "agent.py"
LONG = 100


def load(path):
    return import_file(path, "level6")

ODD = from_turns("tâche ☕ with odd results", [("t", {"n": 0, "x": [None, 1.5, "☕"]}, ""),
                                              ("t", {"n": 1}, "line one\nline two\n" * 900),
                                              ("u", {}, "ünïcode ☕ " * 2000)], name="odd results")


def short(path):
    out = set()
    for scenario, folder, again in ((support_tickets(7), NESTED_FOLDER, True), (ODD, ABSOLUTE_FOLDER, False)):
        out |= explore_journal(load(path).run_agent, load(path).load_checkpoint, scenario, directory=folder,
                               rerun=again).tripped
    return out


def long(path, turns=LONG):
    return explore_journal(load(path).run_agent, load(path).load_checkpoint, long_conversation(turns, seed=3),
                           models=("M1", "M2"), sample=True, measure=True, timeout=60)


# name -> (what the short runs trip, what the long run trips; None: no long run here)
EXPECTED = {
    "right/append_only_os_calls.py": (set(), set()),
    "right/journal_in_wal_subfolder.py": (set(), set()),
    # Right until a second run began in the folder a crash left: its sequence numbers start over.
    "wrong/sequence_numbers_restart_each_run.py": ({"RERUN"}, None),
    "right/checksummed_lines.py": (set(), set()),
    "wrong/starter_whole_history.py": (set(), {"BYTES"}),
    "wrong/compacts_every_four_saves.py": (set(), {"BYTES"}),
    "wrong/loader_reads_the_torn_line.py": ({"PARSE"}, None),
    "wrong/snapshot_written_in_place.py": ({"PARSE"}, None),
    "wrong/old_lines_replayed_after_compaction.py": ({"WHOLE"}, None),
    # Each save is message lines and a counters line in one write; the loader applies complete lines.
    "wrong/loader_applies_a_torn_saves_complete_lines.py": ({"WHOLE"}, {"WHOLE"}),
    "wrong/journal_without_save_point_a.py": ({"TRACE"}, None),
    "wrong/journal_left_in_the_buffer.py": ({"TRACE", "WHOLE", "FRESH"}, None),
    "wrong/journal_forgets_pending.py": ({"PAIRING"}, None),
    "wrong/journal_ignores_directory.py": ({"TRACE", "ERROR"}, None),
    "wrong/snapshot_temp_opened_exclusively.py": ({"RERUN"}, None),
    "wrong/loader_refuses_a_fresh_snapshot.py": ({"PARSE"}, None),
    # A ticket on disk and the state in memory: each crash state is loaded in a process that never saw the run.
    "wrong/ticket_on_disk_state_in_sys.py": ({"PARSE"}, None),
    "wrong/ticket_on_disk_state_in_builtins.py": ({"PARSE"}, None),
    "right/journal_by_pathlib_ignores_strangers.py": (set(), set()),
    # The loader applies each line's messages and counters but keeps the snapshot's pendingToolUse.
    "wrong/loader_keeps_the_snapshots_pending.py": ({"PAIRING"}, {"PAIRING"}),
    # Compaction deletes the old journal before the new snapshot is renamed in: the old snapshot then
    # names a journal that is gone, and the loader returns an older save.
    "wrong/old_journal_deleted_before_the_snapshot_lands.py": ({"WHOLE", "TRACE"}, {"TRACE"}),
    # Stops at a last line that does not parse, without looking for its newline: right (a cut JSON object
    # never parses).
    "right/loader_skips_an_unparseable_last_line.py": (set(), set()),
    # "wb" for the journal: each line replaces the one before.
    "wrong/journal_opened_with_w.py": ({"WHOLE", "PARSE", "TRACE"}, {"TRACE", "PARSE"}),
    # One journal for ever, emptied before the new snapshot is renamed in: an older save in between.
    "wrong/journal_emptied_before_the_snapshot_lands.py": ({"TRACE", "WHOLE"}, {"TRACE"}),
    # str.splitlines() also splits at U+2028, U+2029 and U+0085, which json.dumps(ensure_ascii=False)
    # leaves raw: right on the course's task, wrong on text that holds one (the test below).
    "wrong/loader_splits_lines_on_unicode_separators.py": (set(), None),
    # One journal handle open for the run, flushed at every save.
    "right/journal_handle_kept_open.py": (set(), set()),
    # Each line repeats every message since the snapshot: whole after any crash, but the bytes grow faster
    # than the conversation (about n^1.5 with the doubling rule).
    "wrong/lines_repeat_everything_since_the_snapshot.py": (set(), {"BYTES"}),
    # Round 5. Right: length-prefixed records (a record cut short is ignored); one journal for the run with
    # the snapshot recording the offset to read from; a file per save, applied in the order of its number.
    "right/length_prefixed_records.py": (set(), set()),
    "right/snapshot_records_the_journal_offset.py": (set(), set()),
    "right/delta_files_sorted_by_number.py": (set(), set()),
    # The same files applied in string order: "save-10" before "save-9", told as messages out of order.
    # A second run in a crashed folder numbers on past 9 at once (RERUN); the long run gets there itself.
    "wrong/delta_files_sorted_as_strings.py": ({"RERUN"}, {"WHOLE"}),
    # A line's null pendingToolUse (save point B) is skipped: the answered call stays pending.
    "wrong/loader_ignores_a_null_pending_line.py": ({"PAIRING"}, {"PAIRING"}),
    # Round 6. Right: a CURRENT file names the generation (snapshot-N.json, journal-N.jsonl) in force.
    "right/current_file_names_the_generation.py": (set(), set()),
    "wrong/tokens_used_left_out_of_the_lines.py": ({"COUNTS"}, {"COUNTS"}),  # the snapshot's spend, for ever
    # A line per message, then a counters line, each its own os.write: a kill between two leaves a mix.
    "wrong/message_lines_and_counters_line_in_separate_writes.py": ({"WHOLE"}, {"WHOLE"}),
    "right/counters_as_increments.py": (set(), set()),  # lines hold how much turns and tokensUsed grew
    # A new run appends to the journal of the snapshot an earlier run left: its first line does not follow.
    "wrong/journal_reused_by_a_new_run.py": ({"RERUN"}, set()),
}


def test_the_corpus_is_complete():
    on_disk = {f"{p.parent.name}/{p.name}" for p in CORPUS.glob("*/*.py")}
    assert on_disk == set(EXPECTED)
    assert sum(1 for n in EXPECTED if n.startswith("right/")) >= 3
    assert sum(1 for n in EXPECTED if n.startswith("wrong/")) >= 6


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_submission_trips_exactly_its_invariants(name):
    want_short, want_long = EXPECTED[name]
    assert short(CORPUS / name) == want_short
    if want_long is not None:
        run = long(CORPUS / name)
        assert run.tripped == want_long, run.crashes.report() + "\n" + run.bytes.explain()


# Text with the line separators str.splitlines() splits at and JSON leaves raw (ensure_ascii=False).
SEPARATORS = from_turns("lines\u2028and\u2029paragraphs", [("t", {"s": "a\u2028b"}, "x\u0085y\u2028z"),
                                                         ("t", {"n": 1}, "plain")], name="line separators")


def test_a_loader_that_splits_at_unicode_line_separators_is_caught():
    wrong = CORPUS / "wrong" / "loader_splits_lines_on_unicode_separators.py"
    got = explore_journal(load(wrong).run_agent, load(wrong).load_checkpoint, SEPARATORS, directory=NESTED_FOLDER)
    assert got.tripped == {"PARSE"}, got.report()
    for right in (SOLUTION, CORPUS / "right" / "loader_skips_an_unparseable_last_line.py"):
        assert explore_journal(load(right).run_agent, load(right).load_checkpoint, SEPARATORS,
                               directory=NESTED_FOLDER).tripped == set()


def test_the_starter_is_red_only_for_its_bytes_and_the_solution_green():
    assert short(STARTER) == set()
    starter = long(STARTER)
    assert starter.tripped == {"BYTES"}
    # Whole-history saves break the limit long before the end, so the model ends the task early.
    turns = starter.bytes.turns
    assert 50 <= turns < LONG and starter.bytes.planned == LONG
    assert "final answer after turn" in starter.bytes.explain()
    assert starter.bytes.amplification(turns) > 0.8 * turns  # two whole saves per turn: about one history per turn
    solution = long(SOLUTION)
    assert solution.tripped == set(), solution.crashes.report()
    assert solution.bytes.worst[1] < AMPLIFICATION_LIMIT / 2
    assert solution.bytes.turns == LONG, "a loop within the limit runs the whole task"
    assert short(SOLUTION) == set()
    # The compactions of the long run were among the crash points checked.
    renames = [op.index for op in solution.crashes.ops if op.kind == "rename"]
    assert len(renames) >= 5 and solution.crashes.points > 100


def test_the_starter_is_level_2s_solution_with_a_loader():
    starter = STARTER.read_text(encoding="utf-8").split('"""', 2)[2]
    level2 = (ROOT / "solutions" / "level2" / "agent.py").read_text(encoding="utf-8").split('"""', 2)[2]
    assert "def load_checkpoint(" in starter
    assert starter.replace(starter[starter.index("\n\ndef load_checkpoint("):starter.index("\n\ndef spend(")], "") \
        .strip() == level2.strip()


def _write(index, n):
    return Op(index, "write", api="write", path="/x/c", data=b"x" * n)


def test_bytes_are_summed_per_turn_up_to_the_next_model_call():
    ops = [Op(0, "model_start"), _write(1, 10), Op(2, "model_end"), _write(3, 5), Op(4, "tool_end"),
           _write(5, 7), Op(6, "model_start"), Op(7, "model_end"), _write(8, 100), Op(9, "model_start")]
    assert bytes_by_turn(ops) == [22, 122]


def test_history_sizes_are_the_json_size_of_each_turns_save():
    scenario = long_conversation(30, seed=1)
    saves = shared_reference_saves(scenario.task, scenario.responses, scenario.results)
    # (that these are the protocol loop's saves, byte for byte: tests/test_invariants.py)
    want = [len(json.dumps(s, ensure_ascii=False).encode()) for label, s in saves if label == "B"]
    assert history_sizes(None, scenario.task, saves) == want
    assert want[-1] > 20 * want[0] // 2  # the history grows steadily, turn by turn


def test_the_amplification_limit_separates_linear_from_quadratic():
    history = [300 * t for t in range(1, 201)]
    linear = ByteReport("linear", [3 * h for h in history], history)
    quadratic = ByteReport("quadratic", [sum(2 * h for h in history[:t]) for t in range(1, 201)], history)
    assert linear.ok and linear.worst[1] == pytest.approx(3)
    assert not quadratic.ok and quadratic.worst[0] == 200
    assert "turns 151-200" in quadratic.explain() and "square" in quadratic.explain()
    assert quadratic.per_turn(151, 200) / quadratic.per_turn(51, 100) == pytest.approx(2.33, abs=0.02)


def test_the_reader_asks_the_loader_again_only_when_what_it_read_changed(tmp_path):
    seen = []

    def loader(directory):
        with open(Path(directory) / "a", encoding="utf-8") as f:
            seen.append(f.read())
        return {"a": seen[-1]}

    reader = LoaderReader(loader, str(tmp_path))
    one = reader(CrashState(0, "M1", {"a": b"1", "tmp": b"half"}))
    two = reader(CrashState(1, "M1", {"a": b"1", "tmp": b"half a file"}))  # only a file it never opens changed
    three = reader(CrashState(2, "M1", {"a": b"2", "tmp": b"half"}))
    assert one == two == b'{"a": "1"}' and three == b'{"a": "2"}'
    assert seen == ["1", "2"] and reader.calls == 2

    def broken(directory):
        raise ValueError("torn line")

    failure = LoaderReader(broken, str(tmp_path / "b"))(CrashState(0, "M1", {"a": b"1"}))
    assert isinstance(failure, LoaderFailure)
    assert check_loaded(failure, None).invariant == "PARSE"
    assert LoaderReader(lambda d: None, str(tmp_path / "c"))(CrashState(0, "M1", {})) is None



def test_the_reader_gives_each_answers_own_bytes(tmp_path):
    """Equal under == is not the same answer: True is not 1 to the protocol, and key order shows in the bytes."""
    answers = iter([{"version": 1, "turns": [1.5]}, {"version": 1, "turns": [1.5]}, {"version": True, "turns": [1.5]},
                    {"turns": [1.5], "version": 1}, {"version": 1.0, "turns": [1.5]}, {"version": 1, "turns": (1.5,)}])

    def loader(directory):
        (Path(directory) / "a").read_bytes()  # so that each crash state below is new to the reader
        return next(answers)

    reader = LoaderReader(loader, str(tmp_path))
    outs = [reader(CrashState(i, "M1", {"a": str(i).encode()})) for i in range(6)]
    assert outs == [b'{"version": 1, "turns": [1.5]}', b'{"version": 1, "turns": [1.5]}', b'{"version": true, "turns": [1.5]}',
                    b'{"turns": [1.5], "version": 1}', b'{"version": 1.0, "turns": [1.5]}', b'{"version": 1, "turns": [1.5]}']
    assert reader.calls == 6
    assert check_loaded(outs[2], None).invariant == "FIELDS"

    loop = {"version": 1}
    loop["self"] = loop
    assert isinstance(LoaderReader(lambda d: loop, str(tmp_path / "b"))(CrashState(0, "M1", {})), LoaderFailure)


def test_the_reader_lays_out_each_crash_state_exactly_whether_or_not_the_loader_writes(tmp_path):
    """A loader that only reads leaves the scratch folder as the reader made it, so the reader
    changes only what differs; one that writes (repairs a torn line, say) is never trusted again."""
    # A journal that grows, is cut back by a torn line, and grows again, beside files that change.
    states = [({"a": b"1"}, ()), ({"a": b"1", "wal/j": b"x"}, ()), ({"a": b"1", "wal/j": b"xy"}, ()),
              ({"a": b"1", "wal/j": b"xyz"}, ()), ({"a": b"1", "wal/j": b"xq"}, ()), ({"a": b"1", "wal/j": b"xqr"}, ()),
              ({"a": b"2"}, ("empty",)), ({"wal/deep/j": b"y"}, ()), ({"a": b"2", "b": b"3"}, ("wal",)), ({}, ())]

    def listing(directory):
        files = sorted(p for p in Path(directory).rglob("*"))
        names = sorted(str(p.relative_to(directory)) + ("/" if p.is_dir() else "") for p in files)
        return {"names": names, "bytes": {str(p.relative_to(directory)): p.read_text() for p in files if p.is_file()
                                          and p.name != "left by the loader"}}

    def expected(files, dirs):
        names = set(files) | {d + "/" for d in dirs}
        for name in list(names):
            while "/" in name.rstrip("/"):
                name = name.rstrip("/").rsplit("/", 1)[0] + "/"
                names.add(name)
        return {"names": sorted(names), "bytes": {n: d.decode() for n, d in files.items()}}

    for writes in (False, True):
        def loader(directory, writes=writes):
            answer = listing(directory)
            if writes:
                (Path(directory) / "a").write_text("repaired")
                (Path(directory) / "left by the loader").write_text("x")
            return answer

        reader = LoaderReader(loader, str(tmp_path / str(writes)))
        for i, (files, dirs) in enumerate(states * 2):
            got = json.loads(reader(CrashState(i, "M1", files, dirs=dirs)))
            assert got == expected(files, dirs), (writes, i)
        assert reader.calls > len(states) // 2 and reader.slots[0].exact is not writes


def test_a_long_run_checks_every_point_around_a_rename_and_a_spread_of_the_rest():
    ops = []
    for turn in range(300):
        ops += [Op(len(ops), "model_start"), Op(len(ops) + 1, "model_end"), _write(len(ops) + 2, 5),
                Op(len(ops) + 3, "tool_end")]
        if turn % 50 == 49:
            ops.append(Op(len(ops), "rename", path="/x/t", dest="/x/c"))
    points = sampled_points(ops, limit=160)
    assert len(points) <= 160
    for op in ops:
        if op.kind == "rename":
            assert set(range(op.index - 2, min(op.index + 4, len(ops) + 1))) <= set(points)
    assert points[0] == 0 and max(points) > len(ops) - 10



@pytest.mark.skipif(not os.access("/dev/shm", os.W_OK), reason="no /dev/shm here")
def test_the_run_and_the_loader_work_in_memory_unless_tmpdir_names_a_folder(monkeypatch, tmp_path):
    """The loader rewrites its scratch folder for each of a hundred crash states and more: in memory,
    not on a disk another process keeps busy. TMPDIR (which the grader's sandbox sets) still wins."""
    solution = load(SOLUTION)
    folders = []

    def load_checkpoint(directory):
        folders.append(os.path.realpath(directory))
        return solution.load_checkpoint(directory)

    def explore():
        folders.clear()
        result = explore_journal(solution.run_agent, load_checkpoint, support_tickets(7), models=("M1",))
        assert result.ok and folders, result.crashes.report()
        return [result.crashes.workdir] + folders

    monkeypatch.delenv("TMPDIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", None)
    tempfile.gettempdir()  # as any temp folder made earlier in the run does
    assert all(f.startswith("/dev/shm" + os.sep) for f in explore())
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert all(f.startswith(os.path.realpath(tmp_path) + os.sep) for f in explore())

def test_end_to_end_through_pytest():
    """The exercise's own tests, through the plugin: green on the solution."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "exercises" / "level6"),
                           "--submission", str(ROOT / "solutions" / "level6"), "--crashcourse-examples", "1"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "10 of 10 points" in done.stdout


def test_the_demos_bytes_row_counts_the_turns_and_ratio_pytest_prints():
    """The demo measures the long task the tests use, so its cell and pytest's message name the same
    number of turns and the same ratio (a 60-turn demo once said 61x where pytest said 51.4 over 50)."""
    import re

    from grader.engine.scripted import DEFAULT_SEED
    from grader.faces import matrix
    from grader.levels import manifest
    from grader.levels.journal import LONG_TURNS

    level = manifest.load().require(6)
    for path, word in ((STARTER, "bytes grow"), (SOLUTION, "ok")):
        col = matrix.level_column("x", path.parent, level, DEFAULT_SEED)
        cell = next(c[0] for c in col.cells.values() if c and c[0].startswith(word + " ("))
        ratio, turns = re.fullmatch(word + r" \(([\d.]+)x over (\d+) turns\)", cell).groups()
        tested = explore_journal(load(path).run_agent, load(path).load_checkpoint,
                                 long_conversation(LONG_TURNS, seed=DEFAULT_SEED), models=("M1",), sample=True,
                                 measure=True, timeout=60).bytes
        said = re.search(r"Over (\d+) turns .* about ([\d.]+) times over", tested.explain())
        assert (turns, ratio) == said.groups(), (cell, tested.explain())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform: loads run in-process")
def test_the_reader_loads_several_states_side_by_side_and_answers_in_order(tmp_path):
    """Each load runs in a fresh process, each on a folder of its own; with more than one fork server
    they overlap in time, and the answers (and a loader stuck on one state) come back in order."""
    source = tmp_path / "loader.py"
    # Made only where two loads can run at once: the second and third states' loads then wait for each
    # other (the first shows which files the loader reads, so the next are known to need loads of their own).
    meet = tmp_path / "meet"
    source.write_text(
        "import os, time\n"
        f"MEET = {str(meet)!r}\n"
        "def load_checkpoint(directory):\n"
        "    with open(os.path.join(directory, 'journal'), encoding='utf-8') as f:\n"
        "        lines = f.read().splitlines()\n"
        "    while lines and lines[-1] == 'stuck':\n"
        "        pass\n"
        "    met = False\n"
        "    if len(lines) in (2, 3) and os.path.exists(MEET):\n"
        "        open(os.path.join(MEET, str(len(lines))), 'w').close()\n"
        "        other, ends = os.path.join(MEET, str(5 - len(lines))), time.monotonic() + 30\n"
        "        while not met and time.monotonic() < ends:\n"
        "            met = os.path.exists(other)\n"
        "            time.sleep(0.01)\n"
        "    return {'lines': lines, 'met': met}\n", encoding="utf-8")
    load = import_file(source, "fresh").load_checkpoint
    together = fresh.width() > 1
    if together:
        meet.mkdir()
    states = [CrashState(i, "M1", {"journal": "".join(f"{n}\n" for n in range(i + 1)).encode()}) for i in range(6)]
    reader = LoaderReader(load, str(tmp_path / "scratch"), timeout=40.0)
    got = [(state.point, json.loads(raw)) for state, raw in reader.each(states)]
    assert [(point, answer["lines"]) for point, answer in got] == [(i, [str(n) for n in range(i + 1)]) for i in range(6)]
    assert [answer["met"] for _, answer in got] == [False, together, together, False, False, False]
    assert reader.calls == 6
    if together:
        shutil.rmtree(meet)
    # Each state twice, with a half-written file beside it that the loader never opens: the second
    # waits for the first's answer rather than loading the same journal again.
    twins = [CrashState(state.point, "M1", dict(state.files, tmp=half)) for state in states for half in (b"h", b"half")]
    reader = LoaderReader(load, str(tmp_path / "twins"), timeout=40.0)
    got = [json.loads(raw)["lines"] for _, raw in reader.each(twins)]
    assert got == [[str(n) for n in range(i + 1)] for i in range(6) for _ in (0, 1)]
    assert reader.calls == 6
    # A loader stuck on the third state: the two before it are given, then the exploration stops there.
    stuck = states[:2] + [CrashState(2, "M1", {"journal": b"0\nstuck\n"})] + states[3:]
    seen = []
    with pytest.raises(LoopTimeout):
        for state, _raw in LoaderReader(load, str(tmp_path / "stuck"), timeout=1.0).each(stuck):
            seen.append(state.point)
    assert seen == [0, 1]
    hangs.forget_hangs()


def test_a_shared_result_is_made_once_only_while_sharing_is_on():
    from grader.levels import api
    made = []

    def compute():
        made.append(1)
        return len(made)

    assert api.shared(lambda: ("k",), compute) == 1 and api.shared(lambda: ("k",), compute) == 2  # off: each time
    with api.tests_and_column_share():
        assert [api.shared(lambda: ("k",), compute) for _ in range(3)] == [3, 3, 3]
        assert api.shared(lambda: None, compute) == 4  # no key: never shared
    assert api.shared(lambda: ("k",), compute) == 5


def test_watchs_check_explores_the_course_task_once_for_tests_and_column(monkeypatch, tmp_path):
    """In one process (each check of `watch`), the column shows the tests' own exploration of the course's
    task: its loads (a hundred fresh processes) are not made twice."""
    from grader.faces.student import check
    from grader.levels import journal, manifest

    mine = tmp_path / "mine"
    mine.mkdir()
    shutil.copy(SOLUTION, mine / "agent.py")
    explored = []
    real = journal._explore_journal

    def counted(run, load, scenario, **options):
        explored.append(scenario.name)
        return real(run, load, scenario, **options)

    monkeypatch.setattr(journal, "_explore_journal", counted)
    level = manifest.load(ROOT).require(6)
    col, tests = check._tests_then_column(level, mine, 1, None, lambda _line: None)
    assert tests.passed and col is not None and not col.failed
    assert explored.count(support_tickets(0).name) == 1, explored
