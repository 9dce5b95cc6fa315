"""Level 1 as a whole: the starter fails for its planted reasons, the solution passes, and a corpus
of other submissions (each marked with its expected verdict) is graded right, in-process.

One subprocess run each of the starter and the solution proves the pytest plugin path end to end.
"""

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grader.levels import fields as driver
from grader.engine.scripted import ScriptedModelError, check_messages, support_tickets
from grader.engine.loader import import_file

ROOT = Path(__file__).resolve().parent.parent
STARTER = ROOT / "exercises" / "level1" / "checkpoint.py"
SOLUTION = ROOT / "solutions" / "level1" / "checkpoint.py"
CORPUS = sorted((ROOT / "tests" / "corpus" / "level1").glob("*.py"))

PLANTED = {"fields", "turns", "tokensUsed", "version", "task", "pendingToolUse", "load-version", "load-shape"}


def load(path):
    return import_file(path, "level1")


def expected_verdict(path):
    """The first docstring line: `VERDICT: pass` or `VERDICT: fail id,id,...`."""
    first = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))).splitlines()[0]
    kind, _, ids = first.removeprefix("VERDICT:").strip().partition(" ")
    assert kind in ("pass", "fail"), f"{path.name}: first docstring line must be a VERDICT, got {first!r}"
    return set(filter(None, ids.split(","))) if kind == "fail" else set()


def test_the_starter_fails_for_its_planted_reasons_only():
    assert set(driver.level1_verdict(load(STARTER))) == PLANTED


def test_the_solution_passes_every_check():
    assert driver.level1_verdict(load(SOLUTION)) == {}


def test_the_corpus_has_enough_of_each_kind():
    verdicts = [expected_verdict(p) for p in CORPUS]
    assert sum(1 for v in verdicts if v) >= 6
    assert sum(1 for v in verdicts if not v) >= 3


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_each_corpus_submission_gets_its_verdict(path):
    verdict = driver.level1_verdict(load(path))
    assert set(verdict) == expected_verdict(path), "\n\n".join(verdict.values())
    for message in verdict.values():
        # Every failure is a lesson (what to try), never a bare exception from the grader.
        assert "What to try:" in message or message.startswith("checkpoint.py needs"), message


def test_resume_from_a_good_checkpoint_ends_like_a_run_that_never_crashed(tmp_path):
    solution = load(SOLUTION)
    scenario = support_tickets(3)
    run = driver.crash_run(solution.save_checkpoint, scenario, str(tmp_path), 2, "model")
    resume = driver.resume_run(solution.load_checkpoint, run)
    assert resume.finished and resume.error is None
    assert [name for name, _ in resume.tool_runs] == ["publish_table"]
    assert resume.turns == 3
    assert resume.tokens == sum(driver.spend(r) for r in scenario.responses)


def test_resume_answers_a_pending_call_so_the_api_accepts_the_transcript(tmp_path):
    solution = load(SOLUTION)
    run = driver.crash_run(solution.save_checkpoint, support_tickets(), str(tmp_path), 2, "tool")
    on_disk = json.loads(run.raw())
    assert on_disk["pendingToolUse"]["name"] == "classify_tickets"
    resume = driver.resume_run(solution.load_checkpoint, run)
    assert resume.reconciled == on_disk["pendingToolUse"]
    assert resume.finished and resume.error is None
    # classify ran once before the crash; resume answered it with an error result and did not rerun it.
    assert run.tools.runs_of(on_disk["pendingToolUse"]["id"]) == 1


def test_the_crashed_run_passes_runtime_only_keys_to_save(tmp_path):
    seen = []
    driver.crash_run(lambda state, directory: seen.append(sorted(state)), support_tickets(), str(tmp_path), 1, "tool")
    assert seen and all({"client", "startedAt"} <= set(keys) for keys in seen)
    with pytest.raises(TypeError):
        json.dumps(driver.LiveClient())


def test_the_future_format_really_is_unreadable_as_version_1(tmp_path):
    run = driver.crash_run(load(SOLUTION).save_checkpoint, support_tickets(), str(tmp_path), 1, "model")
    future = json.loads(driver.future_format(run))
    assert future["version"] == 2
    with pytest.raises(ScriptedModelError):
        check_messages(future["messages"])


@pytest.fixture(scope="module")
def plugin_runs():
    """`pytest exercises/level1` on the starter and on the solution, started together to save time."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:benchmark", "-q", "exercises/level1"]
    procs = {
        "starter": subprocess.Popen(base, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
        "solution": subprocess.Popen(base + ["--submission", "solutions/level1"], cwd=ROOT, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
    }
    return {name: (proc.communicate(timeout=120)[0], proc.returncode) for name, proc in procs.items()}


def test_pytest_on_the_starter_fails_the_planted_tests(plugin_runs):
    out, code = plugin_runs["starter"]
    assert code == 1, out[-2000:]
    failed = {line.split("::")[-1].split()[0] for line in out.splitlines() if line.startswith("FAILED ")}
    assert failed == {
        "test_the_file_holds_exactly_the_six_fields",
        "test_without_turns_the_turn_cap_overshoots",
        "test_without_tokens_used_the_spend_budget_trips_late",
        "test_without_version_a_future_format_loads_silently",
        "test_without_task_resume_cannot_say_what_it_resumes",
        "test_without_pending_tool_use_a_crash_mid_tool_goes_unnoticed",
        "test_load_refuses_versions_it_does_not_know",
        "test_load_refuses_a_file_it_cannot_resume_from",
    }, out[-2000:]
    assert "Traceback" not in out


def test_pytest_with_the_solution_as_submission_passes(plugin_runs):
    out, code = plugin_runs["solution"]
    assert code == 0, out[-3000:]
    assert "13 of 13 points" in out


def test_readme_hints_and_tests_number_the_same_tasks():
    folder = ROOT / "exercises" / "level1"
    readme = set(re.findall(r"^## (\d+)\. (.+)$", (folder / "README.md").read_text(encoding="utf-8"), re.M))
    hints_text = (folder / "hints.md").read_text(encoding="utf-8")
    hints = set(re.findall(r"^## (\d+)\. (.+)$", hints_text, re.M))
    tasks = set(re.findall(r"taskno=(\d+)", (folder / "test_checkpoint.py").read_text(encoding="utf-8")))
    assert readme == hints and {n for n, _ in readme} == tasks
    from grader.levels.manifest import parse_hints

    for task in parse_hints(folder / "hints.md"):   # three steps per task, and per cause with its own
        assert len(task.steps) == 3 and all(len(steps) == 3 for steps in task.by_cause.values()), task
    assert "manual-review" in (folder / "answers.md").read_text(encoding="utf-8").splitlines()[0]


def test_a_save_read_as_it_was_written_is_not_told_as_a_kill():
    """The six-fields check reads every save as it is written: its story names that save and says so,
    not the kill after turn 3 that merely ends the run."""
    told = driver.check_six_fields(load(ROOT / "tests" / "corpus" / "level1" / "w01_dumps_whole_state.py"))
    assert told.startswith("After save point A of turn 1,") and "each save of its first 3 turns" in told, told
    assert "killed" not in told, told
