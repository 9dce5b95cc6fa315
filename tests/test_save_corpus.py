"""The grader's verdicts on a corpus of save_checkpoint variants, under crash models M1 and M2.

Each file in ``corpus/save_checkpoint/`` is one way a learner might write ``save_checkpoint``. The
first line of its docstring states the verdict the grader must reach: ``VERDICT: pass``, or
``VERDICT: fail ID,ID`` listing the invariants it must break. The variant is plugged into the
level-2 solution's loop (``run_agent`` calls the module-level ``save_checkpoint``), the loop runs
on the course's scripted task, and every crash state is checked.

A failing variant must trip exactly the listed invariants, no fewer and no more: an extra one
would mean a failure message that blames the wrong thing. ``UNSEEN`` is a verdict too: code that
writes by a route the recorder cannot follow is refused, never passed, and so is ``ERROR``: the loop
stopped on an exception (``os.replace`` from the system temp folder, another file system, raises EXDEV). (The checker reports the most basic
broken invariant per crash state, so a torn file shows as PARSE, not also as WHOLE.)
"""

import ast
import os

import pytest

from grader.engine.explore import explore_loop
from grader.engine.scripted import support_tickets
from grader.engine.loader import import_file

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus", "save_checkpoint")
SOLUTION = os.path.join(os.path.dirname(HERE), "solutions", "level2", "agent.py")
VARIANTS = sorted(f for f in os.listdir(CORPUS) if f.endswith(".py"))


def load(path, name):
    return import_file(path, name=name)


def verdict(path):
    with open(path, encoding="utf-8") as f:
        doc = ast.get_docstring(ast.parse(f.read())) or ""
    first = doc.splitlines()[0] if doc else ""
    words = first.split()
    assert words[:1] == ["VERDICT:"] and words[1:2] in (["pass"], ["fail"]), \
        f"{os.path.basename(path)}: the docstring must start with 'VERDICT: pass' or 'VERDICT: fail IDS'"
    if words[1] == "pass":
        assert len(words) == 2, f"{os.path.basename(path)}: a passing variant lists no invariants"
        return set()
    assert len(words) == 3, f"{os.path.basename(path)}: list the invariants as one comma-separated word"
    return set(words[2].split(","))


def loop_with(variant_file):
    """The solution's run_agent, loaded fresh, calling the variant's save_checkpoint."""
    agent = load(SOLUTION, "corpus_agent_" + variant_file[:-3])
    agent.save_checkpoint = load(os.path.join(CORPUS, variant_file), "corpus_" + variant_file[:-3]).save_checkpoint
    return agent.run_agent


def test_the_corpus_covers_both_verdicts():
    verdicts = [verdict(os.path.join(CORPUS, f)) for f in VARIANTS]
    assert len(VARIANTS) >= 15
    assert sum(1 for v in verdicts if not v) >= 7, "at least seven correct variants"
    assert sum(1 for v in verdicts if v) >= 7, "at least seven wrong variants"


@pytest.mark.parametrize("variant", VARIANTS)
def test_variant_gets_its_verdict(variant):
    expected = verdict(os.path.join(CORPUS, variant))
    exploration = explore_loop(loop_with(variant), support_tickets(0), models=("M1", "M2"))
    if "ERROR" not in expected:
        assert exploration.error is None, exploration.report()
    if "UNSEEN" not in expected:
        assert not exploration.unseen, exploration.report()
    if not expected:
        assert exploration.ok, f"{variant} is correct, but the grader failed it:\n{exploration.report()}"
        # A correct writer tears only temp files, whose tears no checker reads (they are never
        # renamed after the crash), so a pass has one M1 state per crash point.
        assert exploration.states >= exploration.points > 40, "a full run has dozens of crash points"
    else:
        assert exploration.tripped == expected, (
            f"{variant} should break exactly {sorted(expected)}, the grader found {sorted(exploration.tripped)}:\n"
            + exploration.report())
