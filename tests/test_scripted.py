"""The scripted model answers like the real API, including its 400s, and the same seed gives the same run."""

import pytest

from grader.engine.scripted import ScriptedModelError, ScriptedToolError, check_messages, support_tickets


def test_same_seed_same_script():
    assert support_tickets(7).responses == support_tickets(7).responses
    assert support_tickets(7).responses != support_tickets(8).responses


def test_the_ticket_list_spans_several_buffer_flushes():
    assert len(support_tickets().results[0].encode()) > 4 * 8192


def test_a_tool_use_without_its_result_is_refused_like_the_api_would():
    scenario = support_tickets()
    block = scenario.responses[0]["content"][1]
    messages = [{"role": "user", "content": scenario.task},
                {"role": "assistant", "content": scenario.responses[0]["content"]},
                {"role": "user", "content": "carry on"}]
    with pytest.raises(ScriptedModelError, match=block["id"]):
        check_messages(messages)


def test_the_model_is_stateless_so_a_resumed_loop_gets_the_same_answers():
    scenario = support_tickets()
    first = scenario.model()(messages=[{"role": "user", "content": scenario.task}])
    again = scenario.model()(messages=[{"role": "user", "content": scenario.task}])
    assert first == again == scenario.responses[0]


def test_tools_refuse_calls_the_model_never_made_and_log_repeats():
    scenario = support_tickets()
    tools = scenario.executor()
    with pytest.raises(ScriptedToolError):
        tools("list_tickets", {"quarter": "1999-Q1"})
    block = scenario.responses[0]["content"][1]
    tools(block["name"], block["input"])
    tools(block["name"], block["input"])
    assert tools.runs_of(block["id"]) == 2


# -- one model across a run checks only what is new, and misses nothing --------------------------------

def _outcome(check, messages):
    try:
        return len(check(messages))
    except ScriptedModelError as exc:
        return str(exc)


def test_the_model_checks_only_new_messages_but_notices_an_earlier_one_edited_in_place():
    import copy
    import random

    from grader.engine.scripted import CheckedHistory, assistant_turns
    from grader.engine.conversations import generated

    rng = random.Random(5)
    scenarios = [support_tickets()] + list(generated(3, 6))
    compared = edits_caught = 0
    for scenario in scenarios:
        for _ in range(15):
            checked, messages = CheckedHistory(), [{"role": "user", "content": scenario.task}]
            for response, result in zip(scenario.responses, scenario.results + [None]):
                assert _outcome(checked, messages) == _outcome(assistant_turns, messages)
                compared += 1
                messages.append({"role": "assistant", "content": copy.deepcopy(response["content"])})
                blocks = [b for b in response["content"] if b.get("type") == "tool_use"]
                if result is None or not blocks:
                    break
                messages.append({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": blocks[0]["id"], "content": result}]})
                # Now and then the loop edits what it sent before, in place, as a buggy loop would.
                roll = rng.random()
                earlier = [m for m in messages[:-1] if isinstance(m.get("content"), list)]
                if roll < 0.15 and earlier:
                    target = rng.choice(earlier)
                    target["content"].clear()
                elif roll < 0.25:
                    rng.choice(messages)["role"] = rng.choice(["user", "assistant", "system"])
                elif roll < 0.3 and len(messages) > 2:
                    del messages[rng.randrange(1, len(messages))]
                before = _outcome(assistant_turns, messages)
                if roll < 0.3 and isinstance(before, str):
                    edits_caught += _outcome(checked, messages) == before
    assert compared > 100 and edits_caught > 5


def test_the_model_refuses_an_edit_to_a_message_it_was_sent_before():
    from grader.engine.scripted import CheckedHistory

    scenario = support_tickets()
    block = scenario.responses[0]["content"][1]
    checked = CheckedHistory()
    messages = [{"role": "user", "content": scenario.task},
                {"role": "assistant", "content": scenario.responses[0]["content"]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block["id"], "content": "ok"}]}]
    assert len(checked(messages)) == 1
    messages[2]["content"][0]["tool_use_id"] = "toolu_someone_else"  # in place: the same objects
    messages.append({"role": "assistant", "content": "fine"})
    messages.append({"role": "user", "content": "go on"})
    with pytest.raises(ScriptedModelError, match=block["id"]):
        checked(messages)


def test_tools_match_calls_by_name_and_input_as_the_log_grows():
    scenario = support_tickets()
    tools = scenario.executor()
    for response in scenario.responses[:-1]:
        block = response["content"][1]
        assert tools(block["name"], block["input"]) == scenario.results[scenario.responses.index(response)]
    assert [effect[0] for effect in tools.effects] == [r["content"][1]["id"] for r in scenario.responses[:-1]]
    tools.effects = []  # a log replaced from outside (resume's executor starts from the crashed run's)
    block = scenario.responses[0]["content"][1]
    tools(block["name"], block["input"])
    assert tools.runs_of(block["id"]) == 1
    with pytest.raises(ScriptedToolError):
        tools(["not", "a", "name"], {})
