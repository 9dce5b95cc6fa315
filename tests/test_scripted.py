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
