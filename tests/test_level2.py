"""Level 2 as a whole: the starter breaks exactly its two planted invariants, each fix alone clears
exactly one, the solution passes, and a corpus of whole agent.py files gets the verdict written in
its docstring (checked in-process with the crash engine).

One subprocess run each of the starter and the solution proves the pytest plugin path end to end,
and that the starter's first screen tells a student what is wrong.
"""

import ast
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from grader.engine.explore import ABSOLUTE_FOLDER, NESTED_FOLDER, explore_loop
from grader.engine.scripted import from_turns, support_tickets
from grader.engine.loader import import_file

ROOT = Path(__file__).resolve().parent.parent
STARTER = ROOT / "exercises" / "level2" / "agent.py"
SOLUTION = ROOT / "solutions" / "level2" / "agent.py"
# A file is a whole agent.py; a folder holds agent.py and helper modules of the learner's own beside it.
CORPUS = sorted([*(ROOT / "tests" / "corpus" / "level2").glob("*.py"),
                 *(p.parent for p in (ROOT / "tests" / "corpus" / "level2").glob("*/agent.py"))])

# Correct submissions the engine cannot vouch for yet, with the reason; strict, so a fix shows up.
# (c08_from_os_import_replace left this list when the recorder began swapping names a submission
# binds at import, such as `from os import replace`, for the duration of the run.)
KNOWN_GAPS: dict = {}


def load(path):
    return import_file(path / "agent.py" if path.is_dir() else path, "level2")


def spliced(base, donor, names):
    """``base`` with the functions ``names`` taken from ``donor``: one fix applied to the starter."""
    tree = ast.parse(base.read_text(encoding="utf-8"))
    donated = {node.name: node for node in ast.parse(donor.read_text(encoding="utf-8")).body
               if isinstance(node, ast.FunctionDef) and node.name in names}
    assert set(donated) == set(names), f"{donor.name} lacks {set(names) - set(donated)}"
    tree.body = [donated.get(getattr(node, "name", None), node) for node in tree.body]
    module = types.ModuleType(f"spliced_{'_'.join(names)}")
    exec(compile(ast.fix_missing_locations(tree), str(base), "exec"), module.__dict__)
    return module


def tripped(module, seed=0):
    """The invariants (plus ERROR/UNSEEN) the loop breaks on the course's task and on a 0-turn conversation."""
    out = set()
    # The folders the level's tests use: nested with a space, and absolute.
    # The course's task is also run a second time in each folder a crash left leftovers in (RERUN).
    for scenario, folder, again in ((support_tickets(seed), NESTED_FOLDER, True),
                                    (from_turns("Say hello", [], "Hello.", seed=seed), ABSOLUTE_FOLDER, False)):
        out |= explore_loop(module.run_agent, scenario, directory=folder, rerun=again).tripped
    return out


def expected_verdict(path):
    path = path / "agent.py" if path.is_dir() else path
    first = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))).splitlines()[0]
    kind, _, ids = first.removeprefix("VERDICT:").strip().partition(" ")
    assert kind in ("pass", "fail"), f"{path.name}: first docstring line must be a VERDICT, got {first!r}"
    return set(filter(None, ids.split(","))) if kind == "fail" else set()


def test_the_starter_breaks_exactly_its_two_planted_invariants():
    assert tripped(load(STARTER)) == {"PARSE", "TRACE"}


def test_fix_one_alone_leaves_only_the_missing_save_point():
    """The starter with the solution's save_checkpoint (temp file, then rename)."""
    assert tripped(spliced(STARTER, SOLUTION, ["save_checkpoint"])) == {"TRACE"}


def test_fix_two_alone_leaves_only_the_torn_file():
    """The starter with the solution's run_agent (save points A and B)."""
    assert tripped(spliced(STARTER, SOLUTION, ["run_agent"])) == {"PARSE"}


def test_the_solution_survives_every_crash():
    assert tripped(load(SOLUTION)) == set()


def test_the_corpus_has_enough_of_each_kind():
    verdicts = [expected_verdict(p) for p in CORPUS]
    assert sum(1 for v in verdicts if v) >= 12
    assert sum(1 for v in verdicts if not v) >= 6


@pytest.mark.parametrize("path", [
    pytest.param(p, id=p.stem, marks=[pytest.mark.xfail(reason=KNOWN_GAPS[p.stem], strict=True)]
                 if p.stem in KNOWN_GAPS else []) for p in CORPUS])
def test_each_corpus_submission_gets_its_verdict(path):
    assert tripped(load(path)) == expected_verdict(path)


@pytest.fixture(scope="module")
def plugin_runs():
    """`pytest exercises/level2` as a student runs it, and with the solution as submission, side by side."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", COLUMNS="100")
    base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "exercises/level2"]
    procs = {
        "starter": subprocess.Popen(base, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
        "solution": subprocess.Popen(base + ["-q", "--submission", "solutions/level2"], cwd=ROOT, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
    }
    return {name: (proc.communicate(timeout=120)[0], proc.returncode) for name, proc in procs.items()}


def test_pytest_on_the_starter_fails_the_planted_tests(plugin_runs):
    out, code = plugin_runs["starter"]
    assert code == 1, out[-2000:]
    failed = {line.split("::")[-1].split()[0] for line in out.splitlines() if line.startswith("FAILED ")}
    assert failed == {"test_a_crash_mid_save_never_leaves_half_a_file", "test_every_tool_call_that_starts_is_on_disk",
                      "test_every_crash_state_of_generated_conversations"}, out[-2000:]
    assert "Traceback" not in out


def test_the_starters_first_screen_says_what_is_wrong(plugin_runs):
    out, _ = plugin_runs["starter"]
    first_screen = "\n".join(out.splitlines()[:40])
    for words in ("PARSE broken", "On disk:", "What resume would run into:", "Re-run just this check:"):
        assert words in first_screen, first_screen


def test_pytest_with_the_solution_as_submission_passes(plugin_runs):
    out, code = plugin_runs["solution"]
    assert code == 0, out[-3000:]
    assert "10 of 10 points" in out


def test_readme_hints_and_tests_number_the_same_tasks():
    folder = ROOT / "exercises" / "level2"
    readme = set(re.findall(r"^## (\d+)\. (.+)$", (folder / "README.md").read_text(encoding="utf-8"), re.M))
    hints_text = (folder / "hints.md").read_text(encoding="utf-8")
    hints = set(re.findall(r"^## (\d+)\. (.+)$", hints_text, re.M))
    tasks = set(re.findall(r"taskno=(\d+)", (folder / "test_agent.py").read_text(encoding="utf-8")))
    assert readme == hints and {n for n, _ in readme} == tasks
    from grader.levels.manifest import parse_hints

    for task in parse_hints(folder / "hints.md"):   # three steps per task, and per cause with its own
        assert len(task.steps) == 3 and all(len(steps) == 3 for steps in task.by_cause.values()), task
    assert "manual-review" in (folder / "answers.md").read_text(encoding="utf-8").splitlines()[0]
