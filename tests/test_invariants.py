"""Each invariant fires on the file that breaks it, and stays quiet on the files a correct loop saves."""

import json

import pytest

from grader.engine.explore import windows_for
from grader.engine.invariants import Window, check
from grader.engine.checkpoint import reference_saves, spend
from grader.engine.scripted import support_tickets
from grader.engine.loader import import_file

SCENARIO = support_tickets(seed=3)
SAVES = reference_saves(SCENARIO.task, SCENARIO.responses, SCENARIO.results)
A1, B1, A2 = SAVES[0][1], SAVES[1][1], SAVES[2][1]


def raw(state):
    return json.dumps(state).encode()


def window(phase, turn, allowed, **kw):
    kw.setdefault("responses", SCENARIO.responses[:turn])
    return Window(phase, turn, allowed, kw.pop("absent_ok", False), **kw)


def test_spend_counts_input_output_and_both_cache_fields():
    assert spend({"usage": {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 3,
                            "cache_read_input_tokens": 2}}) == 20
    assert spend({"usage": {"output_tokens": 5}}) == 5
    assert spend({}) == 0


def test_the_reference_saves_follow_the_protocol_loop():
    labels = [label for label, _ in SAVES]
    assert labels == ["A", "B", "A", "B", "A", "B", "final"]
    assert A1["pendingToolUse"]["name"] == "list_tickets" and A1["turns"] == 0
    assert B1["pendingToolUse"] is None and B1["turns"] == 1
    assert SAVES[-1][1]["tokensUsed"] == sum(spend(r) for r in SCENARIO.responses)


def test_a_save_the_loop_made_passes():
    assert check(raw(A1), window("tool", 1, [A1], started=[A1["pendingToolUse"]["id"]])) is None
    assert check(raw(B1), window("B", 1, [A1, B1], started=[A1["pendingToolUse"]["id"]], recorded_results=1)) is None


@pytest.mark.parametrize("content, invariant", [
    (None, "PARSE"),
    (b"", "PARSE"),
    (b'{"version": 1, "task": "x", "tur', "PARSE"),
    (b"[1, 2]", "PARSE"),
])
def test_unreadable_files_break_parse(content, invariant):
    found = check(content, window("B", 1, [A1, B1], recorded_results=1))
    assert found is not None and found.invariant == invariant


def test_a_missing_field_breaks_fields():
    state = dict(B1)
    del state["tokensUsed"]
    assert check(raw(state), window("B", 1, [A1, B1])).invariant == "FIELDS"


def test_an_extra_runtime_key_breaks_fields():
    state = dict(B1, client="<live client>")
    assert check(raw(state), window("B", 1, [A1, B1])).invariant == "FIELDS"


def test_a_turn_count_that_disagrees_with_the_messages_breaks_counts():
    state = dict(B1, turns=2)
    assert check(raw(state), window("B", 1, [A1, B1])).invariant == "COUNTS"


def test_counting_only_output_tokens_breaks_counts():
    state = dict(A1, tokensUsed=SCENARIO.responses[0]["usage"]["output_tokens"])
    found = check(raw(state), window("A", 1, [A1]))
    assert found.invariant == "COUNTS" and "cache" in found.detail


def test_a_pending_call_that_does_not_match_the_last_tool_use_breaks_pairing():
    state = json.loads(json.dumps(A1))
    state["pendingToolUse"]["input"] = {"quarter": "2020-Q1"}
    assert check(raw(state), window("tool", 1, [A1])).invariant == "PAIRING"


def test_a_stale_pending_call_after_its_result_breaks_pairing():
    state = json.loads(json.dumps(B1))
    state["pendingToolUse"] = A1["pendingToolUse"]
    assert check(raw(state), window("B", 1, [A1, B1])).invariant == "PAIRING"


def test_an_older_save_while_a_tool_runs_breaks_trace():
    tool2 = A2["pendingToolUse"]["id"]
    found = check(raw(B1), window("tool", 2, [A2], started=[A1["pendingToolUse"]["id"], tool2], recorded_results=1,
                                  tool_name="classify_tickets"))
    assert found.invariant == "TRACE" and "classify_tickets" in found.detail


def test_a_file_still_pending_while_the_model_is_called_breaks_fresh():
    found = check(raw(A1), window("model", 1, [B1], started=[A1["pendingToolUse"]["id"]], recorded_results=1,
                                  fresh=True))
    assert found.invariant == "FRESH"


def test_a_valid_but_different_state_breaks_whole():
    state = json.loads(json.dumps(B1))
    state["task"] = "some other task"
    assert check(raw(state), window("B", 1, [A1, B1])).invariant == "WHOLE"


def test_windows_cover_every_crash_point_of_a_run():
    from grader.engine.explore import record_run
    import pathlib
    import tempfile

    path = pathlib.Path(__file__).resolve().parents[1] / "solutions" / "level2" / "agent.py"
    module = import_file(path, "solution_for_windows")
    with tempfile.TemporaryDirectory() as tmp:
        recorder, returned, error, _ = record_run(module.run_agent, SCENARIO, tmp, "checkpoints")
    assert error is None
    windows = windows_for(recorder.ops, SCENARIO.task)
    assert len(windows) == len(recorder.ops) + 1
    phases = [w.phase for w in windows]
    assert phases[0] == "before-first-response" and phases[-1] == "done"
    for phase in ("A", "tool", "B", "model", "final"):
        assert phase in phases


def test_check_reads_only_the_new_messages_of_a_growing_file_and_gives_the_same_findings():
    """Along a journal, each decoded crash state shares its first messages with the one before (the
    same objects): check() then reads only the rest. Its findings must be those of a check that reads
    everything, on correct saves and on saves broken anywhere, early or late."""
    import copy
    import random

    from grader.engine.conversations import generated

    rng = random.Random(11)
    shared: dict = {}   # one exploration's cache: check() keeps what it read of the messages here
    compared = broken = 0
    for scenario in [SCENARIO] + list(generated(4, 8)):
        saves = reference_saves(scenario.task, scenario.responses, scenario.results)
        windows = [window("B", sum(1 for m in s["messages"] if m["role"] == "assistant"), [s], responses=scenario.responses)
                   for _, s in saves]
        messages: list = []
        for (_, state), w in zip(saves, windows):
            # The decoded state shares the messages the last one had, as the loader's reader builds it.
            fresh = copy.deepcopy(state["messages"][len(messages):])
            messages = messages[:len(state["messages"])] + fresh
            data = dict(state, messages=list(messages))
            roll = rng.random()
            if roll < 0.3 and len(messages) > 2:
                # A broken one: a message early or late replaced by another object, or one taken out.
                i = rng.randrange(1, len(messages))
                bad = copy.deepcopy(messages[i])
                if isinstance(bad.get("content"), list) and bad["content"]:
                    bad["content"] = bad["content"][:-1]
                else:
                    bad["role"] = "assistant" if bad["role"] == "user" else "user"
                data["messages"] = messages[:i] + [bad] + messages[i + 1:] if roll < 0.2 else messages[:i] + messages[i + 1:]
            key = json.dumps(data).encode() + str(compared).encode()
            shared[key] = (data, None)
            alone = check(key, w, {key: (data, None)})
            again = check(key, w, shared)
            assert (alone and (alone.invariant, alone.detail)) == (again and (again.invariant, again.detail))
            compared += 1
            broken += alone is not None
    assert compared > 60 and broken > 10


def test_the_reference_saves_are_what_the_protocol_loop_saves_each_through_json():
    """reference_saves builds the saves in linear time, sharing messages between them; each must be
    exactly (values, types and key order) what running the protocol's loop and writing each save as
    JSON gives, on the course's task, generated conversations and a long task."""
    from grader.engine.checkpoint import run_reference, snapshot
    from grader.engine.conversations import generated
    from grader.levels.journal import long_conversation

    for scenario in [SCENARIO, long_conversation(40, seed=2)] + list(generated(6, 10)):
        responses, results, want = list(scenario.responses), list(scenario.results), []
        run_reference(scenario.task, [], lambda r=responses, **_: r.pop(0), lambda name, tool_input, r=results: r.pop(0),
                      lambda state, label, w=want: w.append((label, snapshot(state))))
        got = reference_saves(scenario.task, scenario.responses, scenario.results)
        assert json.dumps(got) == json.dumps(want)


def test_a_loop_that_returns_before_the_task_is_done_is_told_so_not_a_grader_error(tmp_path):
    """The trace then ends before the model's final answer: the saves a correct loop makes stop
    there too, and the learner reads what their loop did, not an IndexError inside the kit."""
    saves = reference_saves(SCENARIO.task, SCENARIO.responses[:1], SCENARIO.results[:1])
    assert [label for label, _ in saves] == ["A", "B"]
    assert reference_saves(SCENARIO.task, SCENARIO.responses[:2], SCENARIO.results[:1])[-1][0] == "A"

    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    source = (root / "solutions" / "level2" / "agent.py").read_text()
    early = source.replace('        response = call_model(tools=tools, messages=state["messages"])',
                           "        return state  # stops after the first tool, before the model's answer", 1)
    assert early != source
    (tmp_path / "agent.py").write_text(early)
    out = subprocess.run([sys.executable, "-m", "pytest", "exercises/level2", "--submission", str(tmp_path), "-q",
                          "-p", "no:cacheprovider"], cwd=root, capture_output=True, text=True).stdout
    assert "IndexError" not in out and "grader/engine" not in out
    assert "test_the_loop_still_finishes_the_task FAILED" in out or "FAILED exercises/level2/test_agent.py::test_the_loop_still_finishes_the_task" in out


def test_a_state_is_taken_as_its_save_only_when_json_would_give_exactly_that():
    """exactly_saved skips the JSON round trip of a returned state, so it must say no wherever the
    round trip would give something else, or fail: True for 1, 1.0 for 1, a tuple for a list, a str
    subclass, a key order changed, a field missing, NaN."""
    from grader.engine.checkpoint import exactly_saved

    class Name(str):
        pass

    saved = json.loads(json.dumps(B1))
    assert exactly_saved(json.loads(json.dumps(B1)), saved) is saved
    assert exactly_saved(dict(B1, runtime="x"), saved) is saved  # snapshot keeps the six fields only
    changed = [dict(B1, turns=True), dict(B1, turns=1.0), dict(B1, messages=tuple(B1["messages"])),
               dict(B1, task=Name(B1["task"])), dict(B1, turns=B1["turns"] + 1), dict(B1, tokensUsed=float("nan")),
               {k: v for k, v in B1.items() if k != "version"},
               dict(B1, messages=[dict(reversed(list(m.items()))) for m in B1["messages"]])]
    for state in changed:
        assert exactly_saved(state, saved) is None, state


def test_a_pending_input_nested_past_pythons_depth_is_a_finding_not_a_crash():
    """A pendingToolUse whose input is a JSON string nested 100,000 deep: the check says the input is not
    the block's, rather than stopping with the kit's own RecursionError."""
    from grader.engine import invariants
    marker = invariants._json_of("[" * 100_000)
    assert marker != [] and marker != invariants._json_of("[" * 100_000)
