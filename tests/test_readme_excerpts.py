"""The README's excerpts are what the commands print today, and every face counts the same crash states.

The quick excerpts run here on every CI run; ``python tools/readme_excerpts.py`` checks them all
(``crashcourse check 2`` and ``crashcourse selfcheck`` take longer).
"""

import importlib.util
import sys
from pathlib import Path

import pytest

from grader.engine.explore import explore_loop
from grader.engine.scripted import support_tickets
from grader.faces import matrix
from grader.engine.scripted import DEFAULT_SEED

KIT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(KIT / "tools"))
import readme_excerpts  # noqa: E402

# `hint 2` in a fresh folder runs the tests first to find the task (seconds): the script checks it.
QUICK = ("crashcourse demo 2", "pytest exercises/level2")


def _excerpt(command):
    found = [e for e in readme_excerpts.excerpts() if e.command == command]
    assert found, f"README.md has no excerpt marked `<!-- excerpt: {command} -->`"
    return found[0]


def test_every_command_the_readme_quotes_is_marked():
    marked = {e.command for e in readme_excerpts.excerpts()}
    assert {"crashcourse demo 2", "crashcourse check 2", "crashcourse hint 2", "pytest exercises/level2",
            "crashcourse selfcheck"} <= marked


@pytest.mark.parametrize("command", QUICK)
def test_the_readme_excerpt_matches_a_real_run(command):
    excerpt = _excerpt(command)
    problem = readme_excerpts.mismatch(excerpt, readme_excerpts.run(command))
    assert problem is None, problem + "\n(python tools/readme_excerpts.py --show N prints the real output)"


def test_an_excerpt_that_drifted_is_caught():
    excerpt = readme_excerpts.Excerpt("x", ["  starter: 99 of 122", "  ...", "  solution: all 186"], 1)
    assert readme_excerpts.mismatch(excerpt, "  starter:   99 of 122\nrows\n  solution: all 186\n") is None
    assert "all 186" in readme_excerpts.mismatch(excerpt, "  starter: 99 of 122\n  solution: all 69\n")
    # Lines with no ellipsis between them must be neighbours in the output as well.
    tight = readme_excerpts.Excerpt("x", ["a", "b"], 1)
    assert readme_excerpts.mismatch(tight, "a\nzzz\nb\n") is not None
    assert readme_excerpts.mismatch(tight, "==\na\nb\n") is None


def _load(path):
    spec = importlib.util.spec_from_file_location(f"excerpt_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_matrix_total_is_the_sum_of_what_each_test_counts():
    """Level 3's tests explore M1+M2, M3 and M4+M5 apart; `check 3` explores all five at once."""
    run_agent = _load(KIT / "exercises" / "level3" / "agent.py").run_agent
    scenario = support_tickets(DEFAULT_SEED)
    whole = explore_loop(run_agent, scenario, models=("M1", "M2", "M3", "M4", "M5"), max_violations=10 ** 6)
    summary = matrix.column("your code", whole, scenario.task).summary()
    broken = states = 0
    for group in matrix.MODEL_GROUPS:
        part = explore_loop(run_agent, scenario, models=group)
        part_broken = len(part.violations) + sum(part.over_cap.values())
        assert f"{matrix.models_words(group)}: {part_broken} of {part.states}" in summary
        broken, states = broken + part_broken, states + part.states
    assert broken > 200  # past the cap on kept violations: the count is still exact
    assert f"{broken} of {states} crash states" in summary


def test_counts_are_the_same_on_a_second_run():
    """Nothing the first run leaves behind (imports, caches, byte code) changes what the second counts."""
    run_agent = _load(KIT / "exercises" / "level2" / "agent.py").run_agent
    first = explore_loop(run_agent, support_tickets(DEFAULT_SEED))
    again = explore_loop(_load(KIT / "exercises" / "level2" / "agent.py").run_agent, support_tickets(DEFAULT_SEED))
    assert (first.states, first.points, len(first.violations), first.by_model) == \
        (again.states, again.points, len(again.violations), again.by_model)


def test_the_graders_own_thread_never_enters_the_trace(tmp_path):
    """`check` runs the tests in a thread while the matrix records: that thread's temp folder is not the loop's."""
    import os
    import tempfile
    import threading

    from grader.engine import recorder

    def tests_thread():
        with recorder.grader_work(), tempfile.TemporaryDirectory(prefix="crashcourse-check-") as tmp:
            with open(os.path.join(tmp, "report.jsonl"), "w") as f:
                f.write("{}")

    rec = recorder.Recorder(watch=[str(tmp_path)])
    with rec:
        with open(tmp_path / "mine.json", "w") as f:
            f.write("{}")
        thread = threading.Thread(target=tests_thread)
        thread.start()
        thread.join()
    assert rec.ops and all(str(tmp_path) in (op.path or "") for op in rec.ops), [op.describe() for op in rec.ops]
    assert not rec.unseen
