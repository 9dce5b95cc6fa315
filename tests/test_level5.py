"""Level 5 as a whole: the scenario names several tools per turn, the checker judges partial turns,
the corpus is graded right, the starter is red for its planted reasons and the solution green.

The corpus in tests/corpus/level5 is graded in-process with the engine call the exercise's tests
make (explore_parallel); one end-to-end run goes through pytest and the plugin.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader.engine.explore import ABSOLUTE_FOLDER, NESTED_FOLDER
from grader.engine.invariants import INVARIANTS
from grader.levels.parallel_calls import (ParallelWindow, check_parallel, explore_parallel, from_parallel_turns, normalize,
                             parallel_tickets, parallel_windows, state_after)
from grader.engine.checkpoint import spend, tool_use_blocks
from grader.engine.scripted import ScriptedModelError, check_messages
from grader.engine.loader import import_file

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(__file__).resolve().parent / "corpus" / "level5"
SCENARIO = parallel_tickets(seed=7)


def load(path):
    return import_file(path, "level5")


# Two calls with the same name and input in one turn (told apart by the builder), one call, three large ones.
TWINS = from_parallel_turns("twins", [[("ping", {"host": "a"}, "pong 1"), ("ping", {"host": "a"}, "pong 2")],
                                      [("ping", {"host": "b"}, "pong 3")],
                                      [("fetch", {"n": i}, "☕" * 3000 * (i + 1)) for i in range(3)]],
                            seed=5, name="twins")
NOTHING = from_parallel_turns("nothing to do", [], name="no tool calls")


def tripped(path):
    run = load(path).run_agent
    out = set()
    for scenario, folder in ((SCENARIO, NESTED_FOLDER), (TWINS, "checkpoints"), (NOTHING, ABSOLUTE_FOLDER)):
        out |= explore_parallel(run, scenario, timeout=20, directory=folder, rerun=scenario is SCENARIO).tripped
    return out


EXPECTED = {
    "right/pathlib_class.py": set(),
    "right/mkstemp_empty_list.py": set(),
    "right/reverse_order.py": set(),
    "wrong/starter_one_pending.py": {"TRACE", "PAIRING", "KEPT"},
    "wrong/all_pending_saved_at_end.py": {"KEPT"},
    "wrong/pending_not_shrinking.py": {"PAIRING"},
    "wrong/pending_grows_as_calls_start.py": {"PAIRING"},
    "wrong/one_user_message_per_result.py": {"ERROR"},
    "wrong/overwrite_in_place.py": {"PARSE"},
    "wrong/save_ignores_directory.py": {"ERROR"},
    "wrong/temp_in_append_mode.py": {"RERUN"},
    "wrong/tools_in_a_thread_pool.py": {"KEPT"},
    "wrong/turns_per_model_turn.py": {"COUNTS"},
    "wrong/results_message_appended_per_result.py": {"ONCE"},
    "wrong/pending_as_one_object.py": {"FIELDS", "PAIRING", "TRACE"},
    "wrong/reruns_first_call.py": {"ONCE"},
    "right/os_open_fdatasync_pending_by_id.py": set(),
    "wrong/pending_cleared_at_the_first_result.py": {"TRACE", "PAIRING"},
    "wrong/tokens_added_per_tool_call.py": {"COUNTS"},
    "right/generator_and_pending_by_id.py": set(),  # a generator of results; pending kept in a dict by id
    "wrong/pending_without_input.py": {"FIELDS"},  # each pending call lacks its input
    "wrong/turns_counted_when_the_calls_are_named.py": {"COUNTS"},  # turns raised at A by the number of calls
    "wrong/last_result_of_a_turn_not_saved.py": {"KEPT"},  # no save after a turn's last result
    "right/each_call_in_a_thread_joined.py": set(),  # a thread per call, joined before the loop moves on
    # Round 5: a results message rebuilt (not changed in place) at each result; pending worked out from the
    # transcript at each save; results in a message with role "tool", and a text block before the results
    # (the API answers both with a 400: the scripted model refuses them when the loop calls it).
    "right/results_message_rebuilt_each_result.py": set(),
    "right/pending_computed_from_the_transcript.py": set(),
    "wrong/results_message_with_role_tool.py": {"ERROR"},
    "wrong/text_before_the_results.py": {"ERROR"},
    # Round 6. Right: pending calls as dataclasses (asdict at each save); a loop class sorting blocks with
    # match, calls in reverse; the results message appended empty before save A (never sent empty: every
    # result of the turn fills it before the model is called, as a resume fills a partly filled one).
    "right/pending_calls_as_dataclasses.py": set(),
    "right/agent_class_with_match_on_blocks.py": set(),
    "right/empty_results_message_saved_at_a.py": set(),
    "wrong/results_under_ids_of_their_own.py": {"ERROR"},  # tool_use_id made up: the API's 400
    "wrong/call_leaves_pending_as_it_starts.py": {"PAIRING", "TRACE"},  # a running call is in neither place
    # A fresh results message per result, holding that result alone, replaces the one before: the 400.
    "wrong/results_message_rebuilt_with_only_the_newest_result.py": {"ERROR"},
}


def test_the_corpus_is_complete():
    on_disk = {f"{p.parent.name}/{p.name}" for p in CORPUS.glob("*/*.py")}
    assert on_disk == set(EXPECTED)
    assert sum(1 for n in EXPECTED if n.startswith("right/")) >= 3
    assert sum(1 for n in EXPECTED if n.startswith("wrong/")) >= 6


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_submission_trips_exactly_its_invariants(name):
    assert tripped(CORPUS / name) == EXPECTED[name]


def test_the_starter_is_red_for_its_planted_reasons_and_the_solution_green():
    assert tripped(ROOT / "exercises" / "level5" / "agent.py") == {"TRACE", "PAIRING", "KEPT"}
    assert tripped(ROOT / "solutions" / "level5" / "agent.py") == set()


def test_the_starter_loses_the_second_call_of_a_turn():
    exploration = explore_parallel(load(ROOT / "exercises" / "level5" / "agent.py").run_agent, SCENARIO)
    lost = exploration.first("TRACE")
    assert lost is not None and "call 2 of 3" in lost.where, exploration.report()
    on_disk = json.loads(lost.files["checkpoint.json"])
    assert len(on_disk["pendingToolUse"]) == 1
    # The same crash state also lost the first call's result, and that is reported too (KEPT).
    kept = [v for v in exploration.violations if v.invariant == "KEPT"]
    assert any(v.point == lost.point and v.model == lost.model for v in kept), exploration.report()


def test_the_scenario_names_two_or_three_tools_per_turn():
    counts = [len(tool_use_blocks(r["content"])) for r in SCENARIO.responses]
    assert counts == [3, 2, 2, 0]
    assert len(SCENARIO.results) == 7
    assert parallel_tickets(7).responses == SCENARIO.responses
    assert len(SCENARIO.results[0].encode()) > 8192  # one save spans several buffer flushes


def test_the_scripted_model_wants_all_of_a_turns_results_in_the_next_message():
    first = SCENARIO.responses[0]
    blocks = tool_use_blocks(first["content"])
    messages = [{"role": "user", "content": SCENARIO.task}, {"role": "assistant", "content": first["content"]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": blocks[0]["id"], "content": "x"}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": b["id"], "content": "x"}
                                             for b in blocks[1:]]}]
    with pytest.raises(ScriptedModelError):
        check_messages(messages)
    merged = messages[:2] + [{"role": "user", "content": messages[2]["content"] + messages[3]["content"]}]
    check_messages(merged)


def _window_at(phase, calls_done):
    """A window of turn 1 of the scenario: ``calls_done`` calls ended and the loop moved on."""
    responses = SCENARIO.responses[:1]
    ids = [b["id"] for b in tool_use_blocks(responses[0]["content"])]
    results = {i: SCENARIO.results[n] for n, i in enumerate(ids[:calls_done])}
    return ParallelWindow(phase, 1, [], False, started=ids[:calls_done + 1], recorded_results=calls_done,
                          responses=responses, task=SCENARIO.task, results=results,
                          kept=frozenset(ids[:calls_done]), partial=True, names=["list_tickets"] * 3,
                          calls=calls_done + 1, current="list_tickets")


def raw(state):
    return json.dumps(state).encode()


def test_a_partial_turn_is_accepted_in_any_order_and_a_mixed_one_is_not():
    window = _window_at("tool", 2)
    ids = list(window.results)
    good = state_after(SCENARIO.task, window.responses, window.results, recorded=ids)
    assert check_parallel(raw(good), window) is None
    swapped = json.loads(json.dumps(good))
    swapped["messages"][-1]["content"].reverse()
    swapped["pendingToolUse"] = list(reversed(swapped["pendingToolUse"])) + []
    assert check_parallel(raw(swapped), window) is None
    mixed = json.loads(json.dumps(good))
    mixed["messages"][-1]["content"][0]["content"] = SCENARIO.results[2]
    assert check_parallel(raw(mixed), window).invariant == "WHOLE"


def test_each_missing_piece_is_named_by_its_invariant():
    window = _window_at("tool", 2)
    ids = list(window.results)
    only_first = state_after(SCENARIO.task, window.responses, window.results, recorded=ids[:1])
    assert check_parallel(raw(only_first), window).invariant == "KEPT"
    at_a = state_after(SCENARIO.task, window.responses, window.results, recorded=[])
    at_a["pendingToolUse"] = at_a["pendingToolUse"][:1]
    assert check_parallel(raw(at_a), window).invariant == "TRACE"
    stale = state_after(SCENARIO.task, window.responses, window.results, recorded=ids)
    stale["pendingToolUse"] = state_after(SCENARIO.task, window.responses, {}, recorded=[])["pendingToolUse"]
    assert check_parallel(raw(stale), window).invariant == "PAIRING"
    twice = state_after(SCENARIO.task, window.responses, window.results, recorded=ids)
    twice["messages"][-1]["content"].append(twice["messages"][-1]["content"][0])
    twice["turns"] += 1
    assert check_parallel(raw(twice), window).invariant == "ONCE"
    counted = state_after(SCENARIO.task, window.responses, window.results, recorded=ids)
    counted["turns"] = 1
    assert check_parallel(raw(counted), window).invariant == "COUNTS"
    as_object = state_after(SCENARIO.task, window.responses, window.results, recorded=ids)
    as_object["pendingToolUse"] = as_object["pendingToolUse"][0]
    assert check_parallel(raw(as_object), window).invariant == "FIELDS"
    assert check_parallel(raw(stale)[:-3], window).invariant == "PARSE"
    assert {"KEPT", "ONCE"} <= set(INVARIANTS)


def test_an_empty_pending_list_and_an_empty_results_message_read_as_nothing_yet():
    state = state_after(SCENARIO.task, SCENARIO.responses[:1], {}, recorded=[])
    loose = json.loads(json.dumps(state))
    loose["messages"].append({"role": "user", "content": []})
    assert normalize(loose) == normalize(state)
    done = state_after(SCENARIO.task, SCENARIO.responses, dict(zip(
        [b["id"] for r in SCENARIO.responses for b in tool_use_blocks(r["content"])], SCENARIO.results)), final=True)
    assert done["pendingToolUse"] is None and done["turns"] == 7
    assert done["tokensUsed"] == sum(spend(r) for r in SCENARIO.responses)
    assert normalize(dict(done, pendingToolUse=[])) == normalize(done)


def test_the_windows_name_the_call_and_the_turn():
    exploration = explore_parallel(load(ROOT / "solutions" / "level5" / "agent.py").run_agent, SCENARIO)
    windows = parallel_windows(exploration.ops, SCENARIO.task)
    words = {w.words() for w in windows}
    assert any("while `classify_tickets` runs (call 2 of 2; 1 result of this turn back)" in w for w in words)
    assert any(w.startswith("turn 3, save point A (the model named 2 calls: `publish_table`, `email_summary`")
               for w in words)
    assert windows[-1].phase == "done"


def test_the_solution_and_the_right_corpus_hold_on_generated_conversations():
    from hypothesis import HealthCheck, given, settings

    from grader.levels.parallel_calls import parallel_conversations

    runs = [load(p).run_agent for p in [ROOT / "solutions" / "level5" / "agent.py", *sorted(CORPUS.glob("right/*.py"))]]

    @settings(max_examples=2, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(parallel_conversations(min_turns=2, max_turns=4))
    def check(scenario):
        for run in runs:
            exploration = explore_parallel(run, scenario)
            assert exploration.ok, exploration.report()

    check()


def test_end_to_end_through_pytest():
    """The exercise's own tests, through the plugin: green on the solution."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "exercises" / "level5"),
                           "--submission", str(ROOT / "solutions" / "level5"), "--crashcourse-examples", "1"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "10 of 10 points" in done.stdout


def test_a_repeated_call_gets_an_input_of_its_own():
    inputs = [(b["name"], b["input"]) for r in TWINS.responses for b in tool_use_blocks(r["content"])]
    assert len({json.dumps(i, sort_keys=True) for i in inputs}) == len(inputs)
    assert inputs[0] == ("ping", {"host": "a"}) and inputs[1][1]["host"] == "a"


def test_states_built_turn_on_turn_are_what_a_whole_rebuild_gives():
    """The protocol's states are built on the turn before and share their parts (JSON round trips
    kept per message part); each must be, value, type and key order, what building the whole
    history and writing it as JSON gives: every turn, every subset of a turn's results, final or not."""
    from grader.engine.checkpoint import initial_state, snapshot, spend, tool_use_blocks
    from grader.engine.conversations import generated
    from grader.levels.parallel_calls import state_after

    def whole(task, responses, results, recorded, final):
        state = initial_state(task)
        state["tokensUsed"] = sum(spend(r) for r in responses)
        for i, response in enumerate(responses):
            state["messages"].append({"role": "assistant", "content": response["content"]})
            blocks = tool_use_blocks(response.get("content"))
            last = i == len(responses) - 1
            if final and last:
                break
            ids = [b["id"] for b in blocks] if not last or recorded is None else list(recorded)
            if ids:
                state["messages"].append({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": x, "content": results[x]} for x in ids]})
                state["turns"] += len(ids)
            if last:
                state["pendingToolUse"] = [{"id": b["id"], "name": b["name"], "input": b["input"]}
                                           for b in blocks if b["id"] not in ids] or None
        return snapshot(state)

    checked = 0
    for scenario in [SCENARIO, TWINS] + list(generated(9, 6, "parallel")):
        results = {b["id"]: scenario.results[k] for k, b in
                   enumerate(b for r in scenario.responses for b in tool_use_blocks(r.get("content")))}
        pieces: dict = {}
        for upto in range(len(scenario.responses) + 1):
            got = scenario.responses[:upto]
            ids = [b["id"] for b in tool_use_blocks(got[-1].get("content"))] if got else []
            base = state_after(scenario.task, got[:-1], results, pieces=pieces) if got else None
            for recorded in [None, [], ids[:1], ids[::-1]]:
                for final in (False, True):
                    want = json.dumps(whole(scenario.task, got, results, recorded, final))
                    assert json.dumps(state_after(scenario.task, got, results, recorded, final)) == want
                    assert json.dumps(state_after(scenario.task, got, results, recorded, final, base=base,
                                                  pieces=pieces)) == want
                    checked += 1
    assert checked > 100
