"""The student commands: demo, check, hint, watch, selfcheck, run, and the crash matrix they draw.

Most tests work in a small kit built in a temp folder (a manifest, level 2's real tests, starter and
solution, a README and hints written here), so they do not depend on what the other levels hold
today. Only a few spawn pytest, the way ``crashcourse check`` does.
"""

import io
import json
import re
import shutil
from pathlib import Path

import pytest

from grader.faces import cli
from grader.levels import manifest
from grader.faces import matrix
from grader.faces.student import common, selfcheck, testrun, watch

KIT = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;]*m")

README = """# Level 2: checkpoints that survive a kill

## 1. The loop still finishes the task
## 2. A crash mid-save never leaves half a file
## 3. Every tool call that starts is on disk
## 4. Any conversation, any crash
"""

HINTS = """# Level 2 hints

## 1. The loop still finishes the task
- Does the loop still reach the model's final answer?
- Compare what run_agent returns with the six fields.
- `json.dump` and a `with open(...)` block.

## 2. A crash mid-save never leaves half a file
- What does checkpoint.json hold while json.dump is half-way through?
- Look at the moment the file gets its real name, and what it holds then.
- `os.replace(tmp, path)` after the `with` block that writes tmp.

## 3. Every tool call that starts is on disk
- If the process dies while a tool runs, how would a resume know it had started?
- Count the save points in one turn of the loop and compare with the lesson's two.
- `state["pendingToolUse"] = {"id": ..., "name": ..., "input": ...}` then save.

## 4. Any conversation, any crash
- Does anything in your save depend on the size of the conversation?
- Run the failing example with the seed it prints.
- `pytest --crashcourse-seed N`.
"""

# Two more submissions, written in other styles: one wrong (in place, pathlib) and one right
# (a NamedTemporaryFile beside the checkpoint, os.replace, both save points).
WRONG_PATHLIB = '''
import json
from pathlib import Path

def save_checkpoint(state, directory="checkpoints"):
    Path(directory).mkdir(parents=True, exist_ok=True)
    (Path(directory) / "checkpoint.json").write_text(json.dumps(state))
'''

RIGHT_TEMPFILE = '''
import json, os, tempfile

def save_checkpoint(state, directory="checkpoints"):
    os.makedirs(directory, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=directory, suffix=".tmp", delete=False) as f:
        json.dump(state, f)
    os.replace(f.name, os.path.join(directory, "checkpoint.json"))
'''


def loop_with(save_source: str, both_save_points: bool) -> str:
    """The level-2 solution's loop around another save_checkpoint (optionally without save point A)."""
    solution = (KIT / "solutions" / "level2" / "agent.py").read_text()
    loop = solution[solution.index("def spend("):]
    if not both_save_points:
        loop = loop.replace('        state["pendingToolUse"] = {"id": block["id"], "name": block["name"], '
                            '"input": block["input"]}\n        save_checkpoint(state, directory)\n', "")
    return save_source + "\n\n" + loop


@pytest.fixture
def kit(tmp_path, monkeypatch):
    """A small kit: level 1 listed but not written yet, level 2 with its real starter, solution and tests."""
    root = tmp_path / "kit"
    levels = []
    real = manifest.load(KIT)
    for number in (1, 2):
        data = {k: getattr(real.level(2), k) for k in ("name", "title", "files", "tests", "readme", "hints",
                                                         "answers", "module", "function", "planted", "crash_models")}
        data = {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}
        data.update(number=number, folder=f"exercises/level{number}", solution=f"solutions/level{number}",
                    name=f"{data['name']}-{number}", title=f"{data['title']} ({number})")
        levels.append(data)
    (root / "exercises" / "level2").mkdir(parents=True)
    (root / "solutions" / "level2").mkdir(parents=True)
    (root / "exercises" / "manifest.json").write_text(json.dumps({"version": 1, "levels": levels}))
    shutil.copy(KIT / "exercises" / "level2" / "agent.py", root / "exercises" / "level2" / "agent.py")
    shutil.copy(KIT / "exercises" / "level2" / "test_agent.py", root / "exercises" / "level2" / "test_agent.py")
    shutil.copy(KIT / "solutions" / "level2" / "agent.py", root / "solutions" / "level2" / "agent.py")
    (root / "exercises" / "level2" / "README.md").write_text(README)
    (root / "exercises" / "level2" / "hints.md").write_text(HINTS)
    shutil.copy(KIT / "exercises" / "level2" / "answers.md", root / "exercises" / "level2" / "answers.md")
    monkeypatch.delenv("CRASHCOURSE_ROOT", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.chdir(root)
    return root


def run_cli(capsys, *argv):
    code = cli.main(list(argv))
    out = capsys.readouterr().out
    return code, out


# --- the crash matrix -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def level2_columns():
    level = manifest.load(KIT).level(2)
    return (matrix.level_column("starter", level.starter_dir, level),
            matrix.level_column("solution", level.solution_dir, level))


def test_the_starter_column_names_each_planted_failure_in_the_loops_words(level2_columns):
    starter, solution = level2_columns
    cells = {matrix._range_label(*[starter.labels[k]] * 2): starter.cells[k] for k in starter.cells}
    assert cells["turn 1, save point B, mid write"] == ["torn file"]
    assert cells["turn 1, save point B, after open"] == ["empty file"]
    assert cells["turn 2, `classify_tickets` running"] == ["untraced tool call"]
    assert cells["turn 1, `list_tickets` named, no save"] == ["ok"]
    assert starter.failed and not solution.failed
    # A save point is named only where the loop saved: the starter saves at B and at the end, never at A.
    starter_words = {phase for phase, _ in starter.labels.values()}
    solution_words = {phase for phase, _ in solution.labels.values()}
    assert not any("save point A" in w for w in starter_words) and "turn 1, save point B" in starter_words
    assert "turn 1, save point A" in solution_words and "final save" in solution_words
    # Side by side, a row takes the name of the loop that saved there.
    alone = matrix.render([starter], width=120)
    both = matrix.render([starter, solution], width=120)
    assert "save point A" not in alone and "`list_tickets` named, no save" in alone
    assert "turn 1, save point A" in both and "no save" not in both
    assert all(cell == ["ok"] for cell in solution.cells.values())


def test_the_matrix_fits_100_columns_and_groups_agreeing_rows(level2_columns):
    text = matrix.render(list(level2_columns), width=100)
    body = [line for line in text.splitlines() if "…" in line or line.startswith("  turn")]
    assert max(len(line) for line in text.splitlines()) <= 100
    keys = matrix.merge_keys(list(level2_columns))
    assert len(body) < len(keys) / 2, "consecutive rows with the same verdicts should share a line"
    assert "turn 1, save point A, after mkdir … after rename" in text
    assert re.search(r"starter: \d+ of \d+ crash states at \d+ crash points broken \(PARSE, TRACE\)", text)
    assert re.search(r"solution: all \d+ crash states at \d+ crash points fine", text)
    assert "—" in text and "this loop does nothing at that point" in text


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_colour_only_on_a_terminal_and_never_with_no_color(level2_columns, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert matrix.Painter(FakeTTY()).enabled
    assert not matrix.Painter(io.StringIO()).enabled
    coloured = matrix.render(list(level2_columns), paint=matrix.Painter(FakeTTY()))
    assert "\x1b[31mtorn file" in coloured
    assert ANSI.sub("", coloured) == matrix.render(list(level2_columns))
    monkeypatch.setenv("NO_COLOR", "1")
    assert not matrix.Painter(FakeTTY()).enabled


@pytest.mark.parametrize("source, both, verdicts", [
    (WRONG_PATHLIB, True, {"torn file", "empty file"}),
    (RIGHT_TEMPFILE, False, {"untraced tool call"}),
    (RIGHT_TEMPFILE, True, set()),
])
def test_the_matrix_judges_submissions_written_in_other_styles(tmp_path, source, both, verdicts):
    (tmp_path / "agent.py").write_text(loop_with(source, both))
    level = manifest.load(KIT).level(2)
    col = matrix.level_column("yours", tmp_path, level)
    found = {word for cell in col.cells.values() for word in cell} - {"ok"}
    assert found == verdicts


def test_a_loop_that_raises_gets_a_message_not_a_matrix(tmp_path):
    (tmp_path / "agent.py").write_text("def run_agent(task, tools, call_model, execute_tool, directory='c'):\n"
                                       "    raise RuntimeError('not written yet')\n")
    level = manifest.load(KIT).level(2)
    text = matrix.render([matrix.level_column("your code", tmp_path, level)])
    assert "did not finish even without a crash" in text and "not written yet" in text
    (tmp_path / "agent.py").write_text("def run_agent(:\n")
    assert "syntax error on line 1" in matrix.render([matrix.level_column("your code", tmp_path, level)])


# --- demo -----------------------------------------------------------------------------------------


def test_demo_draws_the_starter_beside_the_solution_and_skips_missing_levels(kit, capsys):
    code, out = run_cli(capsys, "demo")
    assert code == 0
    assert "Level 1: " in out and "not in this copy of the kit yet" in out
    assert re.search(r"turn 1, save point B, mid write +torn file +ok", out)
    assert "\x1b[" not in out


def test_demo_on_the_real_kit_exits_0(capsys, monkeypatch):
    monkeypatch.chdir(KIT)
    code, out = run_cli(capsys, "demo", "2")
    assert code == 0 and "Level 2: " in out and "untraced tool call" in out


# --- check ----------------------------------------------------------------------------------------


def test_check_fails_the_starter_and_explains_the_first_failure(kit, capsys):
    code, out = run_cli(capsys, "check", "2", "--examples", "2")
    assert code == 1
    assert "✗ task 2  " in out and "✗ task 3  " in out and "✓ task 1  " in out
    got, total = map(int, re.search(r"(\d+) of (\d+) points", out).groups())
    assert 0 < got < total
    first = out[out.index("The first failure, in full"):]
    assert "broken" in first and "On disk:" in first and "What resume would run into" in first
    assert 'Re-run just this check: pytest "exercises/level2/test_agent.py::test_' in first
    assert "crashcourse hint 2" in out
    status = json.loads((kit / ".crashcourse" / "status.json").read_text())
    assert {2, 3} <= set(status["2"]["failing_tasks"]) and status["2"]["passed"] is False


def test_check_passes_a_correct_submission_elsewhere(kit, tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "agent.py").write_text(loop_with(RIGHT_TEMPFILE, True))
    code, out = run_cli(capsys, "check", "2", "--path", str(mine), "--examples", "2")
    assert code == 0, out
    assert re.search(r"(\d+) of \1 points", out) and "Level 2 passes" in out
    assert "your code: all" in out and "The first failure" not in out
    # Level 2 ships answers.md, which grade leaves to the instructor: a pass says it is still to write.
    assert "One more thing: " in out and "answers.md asks a few questions" in " ".join(out.split())


def test_check_of_a_level_not_written_yet_says_so(kit, capsys):
    code, out = run_cli(capsys, "check", "1")
    assert code == 2 and "not in this copy of the kit yet" in out and "exercises/level1/" in out
    code, out = run_cli(capsys, "check", "9")
    assert code == 2 and "There is no level 9" in out


# --- hint -----------------------------------------------------------------------------------------


def remember_failing(kit, tasks):
    level = manifest.load(kit).level(2)
    state = {"2": {"folder": str(level.starter_dir.resolve()), "passed": False, "failing_tasks": tasks,
                   "files": common.files_signature(level.watched_files())}}
    (kit / ".crashcourse").mkdir(exist_ok=True)
    (kit / ".crashcourse" / "status.json").write_text(json.dumps(state))


def test_hints_come_one_step_at_a_time_for_the_first_failing_task(kit, capsys):
    remember_failing(kit, [3, 4])
    code, out = run_cli(capsys, "hint", "2")
    assert code == 0 and "task 3: Every tool call that starts is on disk" in out and "(hint 1 of 3)" in out
    assert "how would a resume know" in out and "Count the save points" not in out
    code, out = run_cli(capsys, "hint", "2")
    assert "(hint 2 of 3)" in out and "Where to look:" in out and "Count the save points" in out
    code, out = run_cli(capsys, "hint", "2")
    assert "What to reach for:" in out and "pendingToolUse" in out and "last hint for task 3" in out
    code, out = run_cli(capsys, "hint", "2")
    assert "(hint 3 of 3)" in out
    shown = json.loads((kit / ".crashcourse" / "hints.json").read_text())
    assert shown == {"2": {"3": 3}}
    code, out = run_cli(capsys, "hint", "2", "--reset")
    assert code == 0 and not json.loads((kit / ".crashcourse" / "hints.json").read_text())
    code, out = run_cli(capsys, "hint", "2", "--task", "1")
    assert "task 1: The loop still finishes the task" in out and "(hint 1 of 3)" in out


def test_hint_follows_the_remembered_cause_not_only_the_failing_task(kit, capsys):
    """A check that failed task 2 for a missing save point B remembers task 3 as the one to hint at."""
    shutil.copy(KIT / "exercises" / "level2" / "hints.md", kit / "exercises" / "level2" / "hints.md")
    remember_failing(kit, [2, 3])
    status_path = kit / ".crashcourse" / "status.json"
    status = json.loads(status_path.read_text())
    level = manifest.load(kit).level(2)
    run = testrun.TestRun(1, [testrun.TestResult("t::test_a", "failed", 2, 3.0, "WHOLE broken: ...",
                                                         ["loop/WHOLE"], ["no-save-b"])])
    status["2"]["hint_task"] = testrun.hint_task(level, run)
    status["2"]["causes"] = run.first_causes()
    assert status["2"]["hint_task"] == 3
    status_path.write_text(json.dumps(status))
    code, out = run_cli(capsys, "hint", "2")
    assert code == 0 and "task 3: Every tool call that starts is on disk" in out
    assert "Why this task: in the last check, nothing is saved after a tool's result is recorded" in out
    # A cause no task's hints name falls back to the first failing task.
    run.results[0].causes = ["mixed"]
    assert testrun.hint_task(level, run) == 2


def test_hint_after_a_check_that_got_stuck_points_at_the_stuck_line(kit, capsys):
    """No task's hints are about a loop that never returns: hint repeats where it got stuck instead."""
    story = ("save_checkpoint got stuck: it was still running after 5 s, so it was stopped.\n"
             "  Where it was: agent.py, line 18, in save_checkpoint\n      while True:\n"
             "  A correct save_checkpoint returns in well under a second in these checks.")
    run = testrun.TestRun(1, [testrun.TestResult("t::test_a", "failed", 1, 1.0, story, [], []),
                                  testrun.TestResult("t::test_b", "failed", 2, 3.0, "Not run: ...", [], [])])
    assert testrun.stuck_words(run) == "\n".join(story.splitlines()[:3])
    remember_failing(kit, [1, 2])
    status_path = kit / ".crashcourse" / "status.json"
    status = json.loads(status_path.read_text())
    status["2"]["stuck"] = testrun.stuck_words(run)
    status_path.write_text(json.dumps(status))
    code, out = run_cli(capsys, "hint", "2")
    assert code == 1 and "Where it was: agent.py, line 18, in save_checkpoint" in out and "while True:" in out
    assert "No task's hints fit yet" in out and "(hint 1 of" not in out
    run.results[0].message = "WHOLE broken: the file is an older save than the last one (it got stuck: no)"
    assert testrun.stuck_words(run) == ""


def test_hint_when_everything_passes(kit, capsys):
    remember_failing(kit, [])
    code, out = run_cli(capsys, "hint", "2")
    assert code == 0 and "nothing to hint at" in out


def test_an_edit_makes_the_remembered_status_stale(kit):
    remember_failing(kit, [3])
    level = manifest.load(kit).level(2)
    path = level.starter_dir / "agent.py"
    path.write_text(path.read_text() + "\n# edited\n")
    status = json.loads((kit / ".crashcourse" / "status.json").read_text())["2"]
    assert status["files"] != common.files_signature(level.watched_files())


# --- watch ----------------------------------------------------------------------------------------


def test_watch_runs_again_when_a_file_changes_and_not_otherwise(tmp_path):
    target = tmp_path / "agent.py"
    target.write_text("v1")
    runs = []
    naps = []

    def nap(seconds):
        naps.append(seconds)
        if len(naps) == 3:  # the learner saves, two polls after the first check
            target.write_text("v2, longer")

    checks = watch.watch_loop([target], lambda: runs.append(target.read_text()), interval=0.01,
                                    max_checks=2, sleep=nap)
    assert checks == 2 and runs == ["v1", "v2, longer"] and len(naps) == 3


def test_watch_stops_cleanly_on_ctrl_c(tmp_path, capsys):
    def interrupted(_):
        raise KeyboardInterrupt

    checks = watch.watch_loop([tmp_path / "agent.py"], lambda: None, sleep=interrupted)
    assert checks == 1 and "Stopped watching." in capsys.readouterr().out


# --- selfcheck ------------------------------------------------------------------------------------


def fake_test_runs(starter_code, solution_code):
    """Stand-in for run_tests (the pytest half is covered by the check tests above)."""
    def run_tests(level, folder, **_):
        failing = Path(folder).parts[-2] == "exercises"
        code = starter_code if failing else solution_code
        results = [testrun.TestResult("t.py::test_a", "passed" if code == 0 else "failed", 1, 1.0, "")]
        return testrun.TestRun(code, results, problem="" if code in (0, 1) else "pytest could not run (usage)")
    return run_tests


def test_selfcheck_passes_a_kit_in_order(kit, capsys, monkeypatch):
    monkeypatch.setattr(testrun, "run_tests", fake_test_runs(1, 0))
    code, out = run_cli(capsys, "selfcheck")
    assert code == 0, out
    assert "level 1: exercises/level1/ is not there yet" in out
    assert "level 2: starter breaks PARSE, TRACE; solution clean" in out
    assert "level 2: starter tests fail as they should" in out and "level 2: solution tests pass" in out


def test_selfcheck_of_one_level_checks_that_level_alone(kit, capsys, monkeypatch):
    ran = []

    def runs(level, folder, **options):
        ran.append(level.number)
        return fake_test_runs(1, 0)(level, folder, **options)

    monkeypatch.setattr(testrun, "run_tests", runs)
    code, out = run_cli(capsys, "selfcheck", "--level", "2")
    assert code == 0, out
    assert "level 2: starter breaks PARSE, TRACE; solution clean" in out and "level 1" not in out
    assert ran == [2, 2]  # its starter and its solution, nothing else
    code, out = run_cli(capsys, "selfcheck", "--level", "9")
    assert code == 2 and "There is no level 9" in out


@pytest.mark.parametrize("starter_code, solution_code, complaint", [
    (0, 0, "the starter passes every test; it should fail"),
    (1, 1, "the solution fails test_a"),
    (1, 4, "the tests could not run on the solution"),
])
def test_selfcheck_holds_starters_and_solutions_to_their_tests(kit, capsys, monkeypatch, starter_code,
                                                                solution_code, complaint):
    monkeypatch.setattr(testrun, "run_tests", fake_test_runs(starter_code, solution_code))
    code, out = run_cli(capsys, "selfcheck")
    assert code == 1 and complaint in out


@pytest.mark.parametrize("level", manifest.load(KIT).existing(), ids=lambda lv: f"level{lv.number}")
def test_each_starter_in_the_kit_breaks_what_the_manifest_says_it_is_planted_to_break(level):
    problems, summary = selfcheck.engine_problems(level)
    assert problems == [], summary
    assert summary.startswith("starter breaks ") and "solution clean" in summary


def test_selfcheck_lists_every_problem(kit, capsys):
    hints = (kit / "exercises" / "level2" / "hints.md")
    hints.write_text(HINTS.replace("- Run the failing example with the seed it prints.\n", "")
                     .replace("Compare what run_agent", "See line 12: compare what run_agent"))
    shutil.copy(kit / "solutions" / "level2" / "agent.py", kit / "exercises" / "level2" / "agent.py")
    data = json.loads((kit / "exercises" / "manifest.json").read_text())
    data["levels"][0]["name"] = data["levels"][1]["name"]
    (kit / "exercises" / "manifest.json").write_text(json.dumps(data))
    code, out = run_cli(capsys, "selfcheck", "--no-tests")
    assert code == 1
    assert "share a name" in out
    assert "task 4 has 2 hint bullets" in out
    assert "cites a line number" in out
    assert "no longer breaks PARSE, TRACE" in out


def test_selfcheck_holds_each_causes_ladder_to_a_tasks_rules(kit, capsys):
    hints = kit / "exercises" / "level2" / "hints.md"
    hints.write_text(HINTS + "\n### Cause: no-save-b (words)\n- A pointer first.\n- The API.\n"
                     "\n### Cause: made-up (words)\n- Why?\n- Where.\n- What.\n")
    code, out = run_cli(capsys, "selfcheck", "--no-tests")
    out = " ".join(out.split())
    assert code == 1 and "the hints of task 4 for 'no-save-b' need exactly 3 bullets, the first a question" in out
    assert "task 4 has hints for the cause 'made-up', which no check records" in out
    assert "task 4 has 3 hint bullets" not in out and "task 4 has 2 hint bullets" not in out  # its own ladder is intact


def test_selfcheck_strict_counts_missing_levels(kit, capsys):
    code, out = run_cli(capsys, "selfcheck", "--no-tests", "--strict")
    assert code == 1 and "exercises/level1/ is not there yet" in out


# --- the README ---------------------------------------------------------------------------------


def test_the_readmes_crash_explorer_example_runs(tmp_path):
    from grader.engine.explore import explore_writes

    text = (KIT / "README.md").read_text()
    block = text.split("```python\n", 1)[1].split("```", 1)[0]
    namespace = {}
    exec(compile(block, "README.md", "exec"), namespace)
    namespace["test_saving_settings_never_leaves_a_broken_file"](explore_writes, tmp_path)


def test_the_readme_keeps_the_two_quickstart_commands():
    text = (KIT / "README.md").read_text()
    quick = text.split("## Quickstart", 1)[1].split("```", 2)[1].strip("\n").splitlines()
    assert quick == ["pip install -e . && crashcourse demo", "pip install -e '.[dev]' && pytest"]


# --- run ------------------------------------------------------------------------------------------


def test_run_drives_the_loop_on_the_scripted_model(kit, capsys, load_module):
    shutil.copy(kit / "solutions" / "level2" / "agent.py", kit / "exercises" / "level2" / "agent.py")
    code, out = run_cli(capsys, "run", "2")
    assert code == 0
    assert "model asks for publish_table" in out
    saved = json.loads((kit / ".crashcourse" / "run" / "checkpoints" / "checkpoint.json").read_text())
    assert saved["turns"] == 3 and saved["pendingToolUse"] is None
    assert "turns=3" in out
    # The conversation is the one pytest and check judge (the plugin's seed), so its sizes match theirs.
    from grader.engine.explore import explore_loop
    from grader.engine.scripted import DEFAULT_SEED, support_tickets

    judged = explore_loop(load_module(kit / "solutions" / "level2" / "agent.py").run_agent, support_tickets(DEFAULT_SEED))
    assert json.loads(judged.final_file) == saved


def test_run_live_without_a_key_explains_what_is_missing(kit, capsys, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    code, out = run_cli(capsys, "run", "2", "--live")
    assert code == 2
    assert "ANTHROPIC_API_KEY" in out or "pip install -e '.[anthropic]'" in out


def test_the_first_hint_asks_about_the_cause_the_check_recorded(kit, capsys):
    """A save that is atomic but renames inside its `with` block gets a question about the buffer,
    not the task's question about temp files it already uses; its count is its own."""
    shutil.copy(KIT / "exercises" / "level2" / "hints.md", kit / "exercises" / "level2" / "hints.md")
    remember_failing(kit, [2])
    status_path = kit / ".crashcourse" / "status.json"
    status = json.loads(status_path.read_text())
    status["2"].update(hint_task=2, causes=["buffered-rename"])
    status_path.write_text(json.dumps(status))
    code, out = run_cli(capsys, "hint", "2")
    out = " ".join(out.split())   # the hints are wrapped to the terminal's width
    assert code == 0 and "task 2: A crash mid-save never leaves half a file" in out and "(hint 1 of 3)" in out
    assert "still held by the open file object?" in out and "open(path, \"w\")" not in out
    code, out = run_cli(capsys, "hint", "2")
    out = " ".join(out.split())
    assert "(hint 2 of 3)" in out and "indented inside the `with open(...)` block" in out
    assert json.loads((kit / ".crashcourse" / "hints.json").read_text()) == {"2": {"2:buffered-rename": 2}}
    # Asked for by number, the task's own ladder.
    code, out = run_cli(capsys, "hint", "2", "--task", "2")
    out = " ".join(out.split())
    assert "open(path, \"w\")" in out and "still held by the open file object" not in out


def test_hint_names_a_syntax_error_instead_of_a_task(kit, capsys):
    (kit / "exercises" / "level2" / "agent.py").write_text("def run_agent(:\n    pass\n")
    code, out = run_cli(capsys, "hint", "2")
    out = " ".join(out.split())
    assert code == 1 and "agent.py has a syntax error on line 1" in out and 'File "agent.py", line 1' in out
    assert "task 1" not in out and "(hint" not in out


def test_hint_refuses_a_task_the_level_does_not_have(kit, capsys):
    code = cli.main(["hint", "2", "--task", "9"])
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert code == 2 and "Level 2 has no task 9" in err and "1. The loop still finishes" in err
    assert "(hint" not in captured.out


def test_demo_in_a_workspace_draws_the_starter_as_shipped_not_the_learners_edit(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("CRASHCOURSE_ROOT", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    ws = tmp_path / "ws"
    assert cli.main(["init", str(ws), "--levels", "2"]) == 0
    shutil.copy(KIT / "solutions" / "level2" / "agent.py", ws / "exercises" / "level2" / "agent.py")
    monkeypatch.chdir(ws)
    capsys.readouterr()
    code, out = run_cli(capsys, "demo", "2")
    assert code == 0 and re.search(r"crash point .* starter\n", out) and "untraced tool call" in out
    assert not re.search(r"crash point .* solution\n", out)   # the instructor's column stays out
    # Without the kit's own copy at hand, the column is the learner's file, and says so.
    monkeypatch.setenv("CRASHCOURSE_ROOT", str(ws))
    code, out = run_cli(capsys, "demo", "2")
    assert code == 0 and re.search(r"crash point .* your file\n", out) and "untraced tool call" not in out
    assert not re.search(r"crash point .* starter\n", out)
