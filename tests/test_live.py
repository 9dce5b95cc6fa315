"""The live path, offline: the real ``anthropic`` client over a mock HTTP transport.

The SDK builds real requests and parses real JSON into its own response models; only the network
is replaced. So these tests check what a live run depends on: that ``call_model`` hands the loop
plain dicts in the protocol's shape, that what the loop sends back is what the API accepts, and
that the checkpoint counts the usage the API reported.
"""

import importlib.util
import json
from pathlib import Path

import pytest

from grader.faces import cli
from grader.faces import live
from grader.faces.matrix import load_module
from grader.engine.checkpoint import spend

anthropic = pytest.importorskip("anthropic")
# The SDK names its HTTP library on its client module (httpx, or httpx2 in newer releases).
httpx = getattr(anthropic._client, "httpx2", None) or getattr(anthropic._client, "httpx", None)

KIT = Path(__file__).resolve().parent.parent

FIRST = {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "tool_use",
         "stop_sequence": None,
         "content": [{"type": "text", "text": "Listing the tickets first."},
                     {"type": "tool_use", "id": "toolu_01A", "name": "list_tickets", "input": {"quarter": "2026-Q3"}}],
         "usage": {"input_tokens": 410, "output_tokens": 52, "cache_creation_input_tokens": 300,
                   "cache_read_input_tokens": None}}
SECOND = {"id": "msg_02", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "tool_use",
          "stop_sequence": None,
          "content": [{"type": "tool_use", "id": "toolu_01B", "name": "publish_table",
                       "input": {"title": "Q3", "markdown": "| type | n |\n|---|---|\n| billing | 3 |"}}],
          "usage": {"input_tokens": 900, "output_tokens": 61, "cache_read_input_tokens": 300}}
LAST = {"id": "msg_03", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "end_turn",
        "stop_sequence": None, "content": [{"type": "text", "text": "Published."}],
        "usage": {"input_tokens": 1000, "output_tokens": 12}}


@pytest.fixture
def mock_api():
    """An Anthropic client whose HTTP goes to a handler that plays three responses and keeps each request."""
    requests = []
    script = [FIRST, SECOND, LAST]

    def handler(request):
        assert request.url.path == "/v1/messages"
        requests.append(json.loads(request.content))
        return httpx.Response(200, json=script[len(requests) - 1])

    client = anthropic.Anthropic(api_key="sk-test", max_retries=0,
                                 http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    return client, requests


def test_a_response_becomes_the_protocols_plain_dict(mock_api):
    client, _ = mock_api
    message = client.messages.create(model="claude-test", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert type(message).__name__ == "Message"
    got = live.response_to_dict(message)
    assert got["stop_reason"] == "tool_use"
    assert got["content"] == FIRST["content"]
    # A null cache count is left out (it counts 0), and the spend is the protocol's.
    assert got["usage"] == {"input_tokens": 410, "output_tokens": 52, "cache_creation_input_tokens": 300}
    assert spend(got) == 762
    json.dumps(got)


def test_the_solution_loop_runs_live_and_its_checkpoint_counts_what_the_api_reported(mock_api, tmp_path):
    client, requests = mock_api
    agent = load_module(KIT / "solutions" / "level2" / "agent.py")
    seen = []
    state, desk = live.run_live(agent.run_agent, client=client, directory=str(tmp_path / "checkpoints"),
                                model="claude-test", on_response=seen.append)
    assert len(requests) == 3 and len(seen) == 3
    assert requests[0]["model"] == "claude-test" and [t["name"] for t in requests[0]["tools"]] == \
        ["list_tickets", "classify_tickets", "publish_table"]
    # The second request carries the first turn back as the API wants it: the assistant's blocks as
    # they came (no SDK-only keys), then the tool_result for that id right after.
    assistant, result = requests[1]["messages"][1:3]
    assert assistant == {"role": "assistant", "content": FIRST["content"]}
    assert result["content"][0]["tool_use_id"] == "toolu_01A"
    assert json.loads(result["content"][0]["content"])[0]["id"] == "T-4000"
    saved = json.loads((tmp_path / "checkpoints" / "checkpoint.json").read_text())
    assert saved["turns"] == 2 and saved["pendingToolUse"] is None
    assert saved["tokensUsed"] == 762 + 1261 + 1012
    assert saved["messages"][-1] == {"role": "assistant", "content": LAST["content"]}
    assert desk.published == ["| type | n |\n|---|---|\n| billing | 3 |"]


def test_a_model_that_never_stops_is_cut_off(mock_api):
    client, requests = mock_api
    call_model = live.make_call_model(client, "claude-test", max_calls=1)
    call_model(tools=[], messages=[{"role": "user", "content": "go"}])
    with pytest.raises(live.TooManyCalls, match="called 1 times"):
        call_model(tools=[], messages=[{"role": "user", "content": "go"}])
    assert len(requests) == 1


def test_without_a_key_or_the_sdk_the_message_says_what_to_do(monkeypatch):
    with pytest.raises(live.LiveUnavailable, match="ANTHROPIC_API_KEY"):
        live.check_available({})
    live.check_available({"ANTHROPIC_API_KEY": "sk-test"})
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(live.LiveUnavailable, match=r"pip install -e '\.\[anthropic\]'"):
        live.check_available({"ANTHROPIC_API_KEY": "sk-test"})


def test_run_live_drives_the_learners_file(mock_api, monkeypatch, tmp_path, capsys):
    client, requests = mock_api
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setattr(live, "default_client", lambda: client)
    monkeypatch.chdir(tmp_path)
    code = cli.main(["run", "2", "--live", "--path", str(KIT / "solutions" / "level2"), "--model", "claude-test"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "model asks for publish_table" in out and "The table the model published" in out
    assert "turns=2" in out and len(requests) == 3
