"""The live path, offline, through the real ``anthropic`` SDK.

Most tests point the SDK at :mod:`tests.messages_standin` with ``ANTHROPIC_BASE_URL``: a local HTTP
server that checks each request the way the Messages API does and plays the course's task. The SDK
builds real requests, retries nothing (the kit makes its own retries, inside ``--timeout``), and
parses real bodies. So these tests check what a live run depends on: what each request carries,
that what the loops send back is a conversation the API accepts, one tool call per turn or several,
that the checkpoint counts what the API billed, and that every way a call can fail ends in one
line that names the cause, followed by what the checkpoint holds.
"""

import datetime
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from grader.faces import cli
from grader.faces import live
from grader.faces.matrix import load_module
from grader.engine.checkpoint import spend

anthropic = pytest.importorskip("anthropic")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import messages_standin as standin  # noqa: E402

# The SDK names its HTTP library on its client module (httpx, or httpx2 in newer releases).
httpx = getattr(anthropic._client, "httpx2", None) or getattr(anthropic._client, "httpx", None)

KIT = Path(__file__).resolve().parent.parent
RUN_DIR = Path(".crashcourse") / "run" / "checkpoints"
ONE_PER_TURN = {"type": "auto", "disable_parallel_tool_use": True}


@pytest.fixture
def api(monkeypatch, tmp_path):
    """Start a stand-in (``api(faults)``), with the SDK's environment pointed at it, in a fresh folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("CRASHCOURSE_MODEL", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-standin")
    started = []

    def start(faults=None, **options):
        server = standin.StandIn(faults, **options).start()
        started.append(server)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        return server

    yield start
    for server in started:
        server.stop()


def run(capsys, level, *extra, files="solutions", model=None):
    """``crashcourse run LEVEL --live`` on the kit's solution (or starter) files; (exit code, output)."""
    folder = KIT / files / f"level{level}" if files in ("solutions", "exercises") else Path(files)
    argv = ["run", str(level), "--live", "--path", str(folder), "--retries", "1", "--timeout", "20", *extra]
    if model:
        argv += ["--model", model]
    code = cli.main(argv)
    return code, capsys.readouterr().out


def saved_state(level):
    if level == 6:
        return load_module(KIT / "solutions" / "level6" / "agent.py").load_checkpoint(str(RUN_DIR))
    return json.loads((RUN_DIR / "checkpoint.json").read_text())


def tool_uses(message):
    return [b for b in message["content"] if b["type"] == "tool_use"]


# --- the happy path on every level with a loop ---------------------------------------------------------


@pytest.mark.parametrize("level, thinking", [(2, False), (3, False), (5, False), (6, False), (2, True), (5, True)],
                         ids=["2", "3", "5", "6", "2-thinking", "5-thinking"])
def test_each_solution_runs_live_and_its_checkpoint_counts_what_the_api_billed(api, capsys, level, thinking):
    server = api(thinking=thinking)
    code, out = run(capsys, level)
    assert code == 0, out
    assert server.rejections == []
    bodies = server.bodies()
    parallel = level == 5
    # One tool call per turn is asked for on every level but 5, in every request.
    assert all(b["model"] == live.DEFAULT_MODEL and b["max_tokens"] == live.DEFAULT_MAX_TOKENS for b in bodies)
    assert all(("tool_choice" in b) != parallel for b in bodies)
    assert all(b["tool_choice"] == ONE_PER_TURN for b in bodies if not parallel)
    served = [len(tool_uses(r)) for r in server.replies]
    assert max(served) == (3 if parallel else 1)
    state = saved_state(level)
    assert state["pendingToolUse"] is None and state["turns"] == sum(served)
    assert state["tokensUsed"] == server.billed()
    assert state["messages"][-1]["content"] == server.replies[-1]["content"]
    assert "model asks for publish_table" in out and "The table the model published" in out
    assert f"turns={state['turns']}, tokensUsed={state['tokensUsed']}" in out
    last = server.replies[-1]["usage"]
    context = last["input_tokens"] + last["cache_read_input_tokens"] + last["cache_creation_input_tokens"]
    assert f"The last call's input was {context:,} tokens" in out and f"spent {server.billed():,}" in out


@pytest.mark.parametrize("level", [2, 5])
def test_the_starters_run_live_too(api, capsys, level):
    # The starters' bugs show under a crash, not in a run that is never interrupted.
    server = api()
    code, out = run(capsys, level, files="exercises")
    assert code == 0, out
    assert server.rejections == []


def test_a_one_call_loop_facing_parallel_calls_is_refused_by_the_api(api, tmp_path):
    # Why the kit sends disable_parallel_tool_use: without it the model may ask for three months at
    # once, level 2's loop answers the first only, and the next request is refused.
    server = api()
    agent = load_module(KIT / "solutions" / "level2" / "agent.py")
    with pytest.raises(live.LiveError) as caught:
        live.run_live(agent.run_agent, client=live.default_client(), directory=str(tmp_path / "cp"),
                      parallel_tools=True)
    assert caught.value.kind == "refused"
    assert "without `tool_result` blocks immediately after" in str(caught.value)
    assert len(tool_uses(server.replies[0])) == 3 and len(server.rejections) == 1


def test_level_5_runs_one_call_per_turn_as_well(api, tmp_path):
    server = api()
    agent = load_module(KIT / "solutions" / "level5" / "agent.py")
    state, desk = live.run_live(agent.run_agent, client=live.default_client(), directory=str(tmp_path / "cp"),
                                parallel_tools=False)
    assert server.rejections == [] and all(b["tool_choice"] == ONE_PER_TURN for b in server.bodies())
    assert state["turns"] == len(server.replies) - 1 and len(desk.published) == 1


def test_ctrl_c_mid_run_still_shows_the_checkpoint(api, capsys, monkeypatch):
    api()
    real = live.TicketDesk.__call__

    def interrupted(self, name, tool_input, **kw):
        if name == "classify_tickets":
            raise KeyboardInterrupt
        return real(self, name, tool_input, **kw)

    monkeypatch.setattr(live.TicketDesk, "__call__", interrupted)
    code, out = run(capsys, 2)
    assert code == 130 and "stopped (Ctrl-C)" in out
    assert "turns=1" in out and '"name": "classify_tickets"' in out


def test_run_4_resumes_a_live_run_stopped_mid_tool(api, capsys):
    server = api()
    code, out = run(capsys, 2, "--stop-at-tool", "2")
    assert code == 3, out
    assert "as tool call 2 began" in out and "crashcourse run 4 --live" in out
    assert '"name": "classify_tickets"' in out and "has no tool_result after it" in out
    before = len(server.requests)
    code, out = run(capsys, 4)
    assert code == 0, out
    assert server.rejections == []
    state = saved_state(4)
    assert state["turns"] == 4 and state["pendingToolUse"] is None
    assert state["tokensUsed"] == server.billed() and len(server.requests) == before + 3


def test_the_level_4_starter_resumes_into_a_conversation_the_api_refuses(api, capsys):
    server = api()
    run(capsys, 2, "--stop-at-tool", "2")
    code, out = run(capsys, 4, files="exercises")
    assert code == 1
    assert "refused the request (400 invalid_request_error)" in out
    assert "without `tool_result` blocks immediately after" in server.rejections[0]
    assert "Checkpoint left on disk" in out


# --- what stops a run, and what it reports ------------------------------------------------------------


def test_an_unknown_model_is_named_with_the_option_to_change_it(api, capsys):
    api()
    code, out = run(capsys, 2, model="claude-nonesuch-9")
    assert code == 1
    assert "does not know the model 'claude-nonesuch-9' (404 not_found_error)" in out and "--model" in out
    assert "No checkpoint at" in out and "the run stopped before a first save was complete" in out


def test_a_deprecated_model_is_flagged_before_the_run_and_named_when_it_is_gone(api, capsys):
    api()
    table = live.deprecated_models()
    retired = "claude-sonnet-4-5" if "claude-sonnet-4-5" in table else next(iter(table), None)
    if retired is None:
        pytest.skip("this SDK ships no table of deprecated models")
    code, out = run(capsys, 2, model=retired)
    assert code == 1
    assert f"the SDK lists {retired} as deprecated" in out
    assert "(404 not_found_error): the SDK lists it as deprecated, with end of life on" in out
    assert "--model" in out


def test_a_model_the_sdk_does_not_name_gets_a_note_before_the_run(api, capsys):
    if not live.known_models():
        pytest.skip("this SDK names no models")
    api()
    code, out = run(capsys, 2, model="claude-sonet-5-5")
    assert out.splitlines()[0].startswith("Note: the installed SDK does not name 'claude-sonet-5-5'")
    assert code == 1 and "--model" in out


def test_an_end_of_life_date_in_the_sdks_words_is_read():
    today = datetime.date(2026, 11, 30)
    assert live._date_passed("November 30th, 2026", today) and live._date_passed("June 1st, 2026", today)
    assert not live._date_passed("January 22nd, 2027", today) and not live._date_passed("soon", today)


def test_the_default_model_is_current():
    # Fails the day an SDK release marks the default deprecated: time to name a newer one in live.py.
    assert live.DEFAULT_MODEL not in live.deprecated_models()
    known = live.known_models()
    if known and live.DEFAULT_MODEL not in known:
        pytest.skip(f"the installed SDK predates {live.DEFAULT_MODEL}")


@pytest.mark.parametrize("reason, words", [
    ("max_tokens", "cut off at max_tokens (4096)"),
    ("refusal", "declined to carry on"),
    ("pause_turn", "paused a long turn"),
])
def test_a_reply_that_does_not_end_the_turn_is_not_a_success(api, capsys, reason, words):
    server = api({1: standin.stop(reason)})
    code, out = run(capsys, 2)
    assert code == 1, out
    line = next(x for x in out.splitlines() if x.startswith("The run did not finish: "))
    assert words in line and "The checkpoint above is what it left" in line
    state = saved_state(2)
    assert state["messages"][-1]["content"] == server.replies[-1]["content"]
    if reason == "max_tokens":
        # The loop took the cut reply for the answer: its tool call is saved with no result after it.
        assert "last message: assistant: text \"Step 2 of the task.\", tool_use classify_tickets" in out
        assert "has no tool_result after it" in out


@pytest.mark.parametrize("fault, kind, words", [
    (standin.status(429, "rate_limit_error"), "rate", "rate-limiting this key (429, 2 tries)"),
    (standin.status(500, "api_error"), "server", "internal error (500, 2 tries)"),
    (standin.status(529, "overloaded_error"), "overloaded", "overloaded (529, 2 tries)"),
    (standin.status(401, "authentication_error"), "auth", "refused the credential (401)"),
    (standin.HTML_PAGE, "malformed", "an HTML page, not JSON"),
    (standin.CUT_JSON, "malformed", "JSONDecodeError"),
    (standin.NO_CONTENT, "malformed", "it has no content list"),
])
def test_each_failure_of_the_api_is_one_line_and_the_checkpoint_is_shown(api, capsys, fault, kind, words):
    # The failure comes at the third request and again at the retry: the run has saved by then.
    server = api({2: fault, 3: fault})
    code, out = run(capsys, 2)
    assert code == 1, out
    line = next(x for x in out.splitlines() if x.startswith("The run stopped:"))
    assert words in line and "Traceback" not in out
    if kind == "malformed":
        assert "the API's fault" in line
    if kind in ("malformed", "auth"):
        assert len(server.requests) == 3  # not retried: trying again would not change the answer
    else:
        assert len(server.requests) == 4  # one retry (--retries 1), then the error
    assert "turns=2" in out and "pendingToolUse=null" in out


def test_a_passing_failure_is_retried_and_the_run_finishes(api, capsys):
    server = api({0: standin.status(529, "overloaded_error"), 3: standin.status(429, "rate_limit_error")})
    code, out = run(capsys, 2)
    assert code == 0, out
    assert len(server.requests) == 7 and saved_state(2)["tokensUsed"] == server.billed()


def test_a_hung_api_ends_at_the_run_timeout_without_retrying(api, capsys):
    server = api({0: standin.hang(30)})
    code, out = run(capsys, 2, "--timeout", "0.5", "--retries", "3")
    assert code == 1, out
    assert "within the run's time limit (--timeout 0.5 s, for the whole run)" in out
    assert len(server.requests) == 1 and "the run stopped before a first save was complete" in out


class FakeClock:
    def __init__(self):
        self.now = 0.0
        self.slept = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


class TimedClient:
    """A client whose calls take ``took`` seconds of the fake clock each, failing as ``errors`` say."""

    def __init__(self, clock, took, errors=()):
        self.clock, self.took, self.errors = clock, took, list(errors)
        self.timeouts = []
        self.messages = self

    def create(self, *, timeout, **_):
        self.timeouts.append(timeout)
        self.clock.now += self.took
        if self.errors:
            raise self.errors.pop(0)
        return dict(FIRST, usage={"input_tokens": 1, "output_tokens": 1})


def overloaded(retry_after):
    response = httpx.Response(529, headers={"retry-after": str(retry_after)},
                              request=httpx.Request("POST", "http://127.0.0.1/v1/messages"))
    return anthropic.InternalServerError("overloaded", response=response, body=None)


def test_the_timeout_is_one_budget_for_the_whole_run():
    clock = FakeClock()
    client = TimedClient(clock, took=40)
    call_model = live.LiveModel(client, timeout=100, clock=clock, sleep=clock.sleep)
    for _ in range(3):
        call_model(tools=[], messages=[{"role": "user", "content": "go"}])
    # Each request gets what is left of the run's 100 s, not 100 s of its own.
    assert client.timeouts == [100, 60, 20]
    with pytest.raises(live.LiveError, match="used up its --timeout of 100 s before model call 4") as caught:
        call_model(tools=[], messages=[{"role": "user", "content": "go"}])
    assert caught.value.kind == "timeout" and len(client.timeouts) == 3


def test_a_retry_waits_as_the_api_asks_but_never_past_the_deadline():
    clock = FakeClock()
    client = TimedClient(clock, took=1, errors=[overloaded(5), overloaded(50)])
    call_model = live.LiveModel(client, timeout=30, retries=5, clock=clock, sleep=clock.sleep)
    with pytest.raises(live.LiveError, match=r"overloaded \(529, 2 tries\)") as caught:
        call_model(tools=[], messages=[{"role": "user", "content": "go"}])
    # One wait of the 5 s asked for; the second would end past the deadline, so the error is final.
    assert caught.value.kind == "overloaded" and clock.slept == [5.0] and len(client.timeouts) == 2


def test_a_refused_connection_is_one_line(api, capsys, monkeypatch):
    server = api()
    server.stop()  # nothing listens there any more
    code, out = run(capsys, 2, "--retries", "0")
    assert code == 1 and "Could not reach the API" in out


@pytest.mark.parametrize("option, value", [("--max-tokens", "0"), ("--max-tokens", "-5"), ("--timeout", "0")])
def test_impossible_options_are_refused_before_any_request(api, capsys, option, value):
    server = api()
    code, out = run(capsys, 2, option, value)
    assert code == 2 and option in out and server.requests == []


# --- credentials, the SDK, folders ---------------------------------------------------------------------


def test_the_sdks_auth_token_is_a_credential(api, capsys, monkeypatch):
    server = api()
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "token-standin")
    code, out = run(capsys, 2)
    assert code == 0, out
    assert server.requests[0]["headers"]["authorization"] == "Bearer token-standin"


def test_without_a_credential_or_the_sdk_the_message_says_what_to_do(monkeypatch):
    with pytest.raises(live.LiveUnavailable, match="ANTHROPIC_API_KEY.*ANTHROPIC_AUTH_TOKEN"):
        live.check_available({})
    live.check_available({"ANTHROPIC_AUTH_TOKEN": "t"})
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(live.LiveUnavailable) as caught:
        live.check_available({"ANTHROPIC_API_KEY": "sk-test"})
    # A hint that works from any folder: no `-e .`, which only works from the kit's root.
    assert "pip install anthropic" in str(caught.value) and "-e" not in str(caught.value)


def test_run_6_shows_its_own_files_and_starts_clean_each_time(api, capsys):
    api()
    for _ in range(2):
        code, out = run(capsys, 6)
        assert code == 0, out
    journals = sorted(p.name for p in RUN_DIR.iterdir() if p.name.startswith("journal-"))
    assert len(journals) == 1 and (RUN_DIR / "snapshot.json").is_file()
    assert f"Files your loop left in {RUN_DIR}" in out and journals[0] in out
    assert "What your load_checkpoint makes of them:" in out and "No checkpoint at" not in out


def test_a_folder_the_learner_chose_is_never_emptied(api, capsys, tmp_path):
    server = api()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    code, out = run(capsys, 2, "--directory", str(mine))
    assert code == 2 and "already holds notes.txt" in out
    assert (mine / "notes.txt").read_text() == "keep me" and server.requests == []


def test_scripted_runs_stop_partway_and_resume(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "2", "--path", str(KIT / "solutions" / "level2"), "--stop-at-tool", "3"]) == 3
    assert json.loads((RUN_DIR / "checkpoint.json").read_text())["pendingToolUse"]["name"] == "publish_table"
    assert cli.main(["run", "4", "--path", str(KIT / "solutions" / "level4")]) == 0
    out = capsys.readouterr().out
    assert "resume_agent returned turns=3" in out
    assert json.loads((RUN_DIR / "checkpoint.json").read_text())["pendingToolUse"] is None


def test_scripted_run_5_plays_a_turn_of_parallel_calls(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    code = cli.main(["run", "5", "--path", str(KIT / "solutions" / "level5")])
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    first_tool = next(i for i, x in enumerate(lines) if x.startswith("  tool "))
    assert sum(1 for x in lines[:first_tool] if "model asks for list_tickets" in x) == 3
    assert json.loads((RUN_DIR / "checkpoint.json").read_text())["turns"] == 7


# --- the conversion, on the SDK's own objects ----------------------------------------------------------


FIRST = {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "tool_use",
         "stop_sequence": None,
         "content": [{"type": "text", "text": "Listing the tickets first."},
                     {"type": "tool_use", "id": "toolu_01A", "name": "list_tickets", "input": {"quarter": "2026-Q3"}}],
         "usage": {"input_tokens": 410, "output_tokens": 52, "cache_creation_input_tokens": 300,
                   "cache_read_input_tokens": None}}


def mock_client(*bodies):
    requests = []

    def handler(request):
        requests.append(json.loads(request.content))
        return httpx.Response(200, json=bodies[min(len(requests), len(bodies)) - 1])

    client = anthropic.Anthropic(api_key="sk-test", max_retries=0,
                                 http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    return client, requests


def test_a_response_becomes_the_protocols_plain_dict():
    client, _ = mock_client(FIRST)
    message = client.messages.create(model="claude-test", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert type(message).__name__ == "Message"
    got = live.response_to_dict(message)
    assert got["stop_reason"] == "tool_use"
    assert got["content"] == FIRST["content"]
    # A null cache count is left out (it counts 0), and the spend is the protocol's.
    assert got["usage"] == {"input_tokens": 410, "output_tokens": 52, "cache_creation_input_tokens": 300}
    assert spend(got) == 762
    json.dumps(got)


def test_a_model_that_never_stops_is_cut_off():
    client, requests = mock_client(FIRST)
    call_model = live.make_call_model(client, "claude-test", max_calls=1)
    call_model(tools=[], messages=[{"role": "user", "content": "go"}])
    with pytest.raises(live.TooManyCalls, match="called 1 times"):
        call_model(tools=[], messages=[{"role": "user", "content": "go"}])
    assert len(requests) == 1


# --- the stand-in refuses what the API refuses ------------------------------------------------------------

TOOLS = [{"name": "list_tickets", "input_schema": {"type": "object"}}]
CALL = {"type": "tool_use", "id": "toolu_1", "name": "list_tickets", "input": {}}
ANSWER = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "[]"}
HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}


def request(messages, **extra):
    return {"model": "claude-test", "max_tokens": 100, "tools": TOOLS, "messages": messages, **extra}


@pytest.mark.parametrize("body, words", [
    (request([{"role": "assistant", "content": "hi"}]), "roles must alternate"),
    (request([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]), "roles must alternate"),
    (request([{"role": "user", "content": "go"}], max_tokens=0), "max_tokens"),
    (request([{"role": "user", "content": "go"}, {"role": "assistant", "content": "ok", "usage": {}},
              {"role": "user", "content": "more"}]), "messages.1.usage: Extra inputs are not permitted"),
    (request([{"role": "user", "content": "go"}], model="claude-gone"), "model: claude-gone"),
    (request([{"role": "user", "content": "go"}, {"role": "assistant", "content": [CALL]},
              {"role": "user", "content": [{"type": "text", "text": "ok"}]}]), "without `tool_result` blocks"),
    (request([{"role": "user", "content": "go"}, {"role": "assistant", "content": [CALL]},
              {"role": "user", "content": [{"type": "text", "text": "first"}, ANSWER]}]), "without `tool_result`"),
    (request([{"role": "user", "content": "go"}, {"role": "assistant", "content": [CALL]}]), "without `tool_result`"),
    (request([{"role": "user", "content": [ANSWER]}]), "unexpected `tool_use_id`"),
    (request([{"role": "user", "content": "go"}, {"role": "assistant", "content": [dict(CALL, name="rm_rf")]},
              {"role": "user", "content": [ANSWER]}]), "not among the tools sent"),
    (request([{"role": "user", "content": "go"}, {"role": "assistant", "content": [dict(CALL, citations=None)]},
              {"role": "user", "content": [ANSWER]}]), "Extra inputs are not permitted"),
    (request([{"role": "user", "content": "go"}, {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "made up", "signature": "sig_forged"}, CALL]},
        {"role": "user", "content": [ANSWER]}]), "Invalid `signature`"),
    (request([{"role": "user", "content": "go"}], tool_choice={"type": "auto", "disable_parallel_tool_use": "yes"}),
     "valid boolean"),
])
def test_the_stand_in_refuses_what_the_api_refuses(body, words):
    with pytest.raises(standin.Rejected, match=re.escape(words)):
        standin.validate(body, HEADERS, {})
    answered = request([{"role": "user", "content": "go"}, {"role": "assistant", "content": [CALL]},
                        {"role": "user", "content": [ANSWER, {"type": "text", "text": "and then?"}]}])
    standin.validate(answered, HEADERS, {})  # the same shapes, done right, pass
