"""Instructor-only scenarios run through the judge and a real sandboxed worker, without pytest in between."""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

from grader.grading import box as box_module
from grader.grading import bubblewrap
from grader.grading import scenarios as scenarios_module
from grader.grading import stand_in
from grader.grading import sandbox

KIT = Path(__file__).resolve().parent.parent


@pytest.fixture
def scenario_file(tmp_path):
    path = tmp_path / "private.json"
    path.write_text(json.dumps({"file": "agent.py", "function": "run_agent", "points": 2, "scenarios": [
        {"name": "refund audit", "task": "Total the refunds",
         "turns": [["read_report", {"week": 1}, "refunds: 40 EUR " * 400], ["read_report", {"week": 2}, "none"]]}]}))
    return path


def grade(tmp_path, source: Path, scenarios: Path, monkeypatch, boxed: bool = False) -> list:
    root = Path(tempfile.mkdtemp(prefix="box-", dir=tmp_path))
    (root / "submission").mkdir(parents=True)
    (root / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root / "tmp"))  # the only place the code may write
    shutil.copy(source, root / "submission" / "agent.py")
    box = box_module.Box(str(root / "submission"), str(root), uuid.uuid4().hex, timeout=20, hide=(str(scenarios),),
                         boxed=boxed)
    try:
        return scenarios_module.run_scenarios(str(scenarios), box)
    finally:
        box.shutdown()
        assert sandbox.marked(box.token) == []


def test_a_private_scenario_fails_the_starter(tmp_path, scenario_file, monkeypatch):
    bad = grade(tmp_path, KIT / "exercises" / "level2" / "agent.py", scenario_file, monkeypatch)
    assert bad[0]["status"] == "failed" and "PARSE" in bad[0]["output"]


# Only the boxed case needs bubblewrap (tests/conftest.py: SYSTEM_MARKERS).
@pytest.mark.parametrize("boxed", [False, pytest.param(True, marks=pytest.mark.bubblewrap)],
                         ids=["bare sandbox", "bubblewrap box"])
def test_the_solution_passes_without_seeing_the_scenario_file(tmp_path, scenario_file, monkeypatch, boxed):
    """The solution, plus code that fails on purpose if it can read the instructor's file."""
    spy = tmp_path / "spy" / "agent.py"
    spy.parent.mkdir()
    spy.write_text((KIT / "solutions" / "level2" / "agent.py").read_text() + f"""

def _peek():
    try:
        with open({str(scenario_file)!r}) as f:
            return f.read()
    except OSError as exc:
        return repr(exc)


_seen = _peek()
_real_run = run_agent


def run_agent(task, tools, call_model, execute_tool, directory="checkpoints"):
    if "refund audit" in _seen:
        raise RuntimeError("read the instructor's scenarios")
    return _real_run(task, tools, call_model, execute_tool, directory)
""")
    if boxed and bubblewrap.check() is not None:
        pytest.skip(f"no bubblewrap box here: {bubblewrap.check()}")
    if not boxed and not sandbox.read_only_view_available():
        pytest.skip("no mount namespaces here, so files cannot be hidden")
    result = grade(tmp_path, spy, scenario_file, monkeypatch, boxed=boxed)
    assert [(t["name"], t["status"], t["max_score"]) for t in result] == [
        ("instructor scenario 1", "passed", 2.0)], result[0]["output"]


CONVERSATION = '''
def talk(call):
    history = [{"role": "user", "content": "the task " * 200}]
    call(messages=history)
    history.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
    call(messages=history)
    history[0]["content"] = "the task, edited in place"
    call(messages=history)
    history.append({"role": "user", "content": 1})
    call(messages=history)
    history[-1]["content"] = True          # equal to 1 in Python, not in JSON
    call(messages=history)
    history.pop(1)
    call(messages=history)
    call(messages=list(history), tools=[{"name": "t"}])
    call(messages=[])
    call(messages=history)
    return len(history)
'''


def test_the_model_sees_every_conversation_exactly_as_the_loop_sent_it(tmp_path, monkeypatch):
    """Calls send only the messages that changed since the last call; what arrives must still be exact."""
    import copy
    source = tmp_path / "talk" / "agent.py"
    source.parent.mkdir()
    source.write_text(CONVERSATION)

    def recorder(seen):
        def call(**kwargs):
            seen.append(copy.deepcopy(kwargs))
            return "reply"
        return call

    expected: list = []
    namespace: dict = {}
    exec(CONVERSATION, namespace)
    namespace["talk"](recorder(expected))

    root = Path(tempfile.mkdtemp(prefix="box-", dir=tmp_path))
    (root / "submission").mkdir(parents=True)
    (root / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root / "tmp"))
    shutil.copy(source, root / "submission" / "agent.py")
    box = box_module.Box(str(root / "submission"), str(root), uuid.uuid4().hex, timeout=20)
    got: list = []
    try:
        talk = stand_in.RemoteSubmission(root / "submission", box).function("agent.py", "talk")
        assert talk(recorder(got)) == 2
        assert talk(recorder(got)) == 2, "a second call starts from nothing on both sides"
    finally:
        box.shutdown()
    assert got == expected * 2
    assert [type(c["messages"][-1]["content"]) for c in got[3:5]] == [int, bool]


def test_a_call_that_refers_to_messages_never_sent_is_refused():
    before = [{"role": "user", "content": "x"}]
    sent = {"messages": [{"role": "assistant", "content": "y"}]}
    assert stand_in.with_kept_messages(sent, before, 1)["messages"] == before + sent["messages"]
    assert stand_in.with_kept_messages(sent, before, 0) is sent
    for keep in (2, -1, True, "1", 1.0):
        with pytest.raises(ValueError):
            stand_in.with_kept_messages(sent, before, keep)
    with pytest.raises(ValueError):
        stand_in.with_kept_messages(sent, None, 1)
