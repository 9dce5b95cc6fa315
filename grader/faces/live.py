"""Drive a learner's loop with the real Messages API (``crashcourse run N --live``).

The loop under test only ever sees plain dicts: ``call_model(*, tools, messages) -> dict`` in
the Messages API shape of DESIGN §3. :class:`LiveModel` wraps the official ``anthropic`` client
so that holds with a real model too: the SDK returns pydantic models, and
:func:`response_to_dict` turns one into the same dict the scripted model hands out, after checking
it really is a message.

What each request carries: the model (:data:`DEFAULT_MODEL` unless ``--model`` says otherwise),
``max_tokens``, the task's tools, the conversation so far and, for every level whose loop answers
one tool call per turn, ``tool_choice={"type": "auto", "disable_parallel_tool_use": true}``: a
model may otherwise ask for two tools in one turn, and a loop that answers only the first leaves a
transcript the API refuses. The parallel level (5) leaves the model free to do so.

Everything that can go wrong on the way (a retired model, a refused key, a rate limit, an overloaded
or broken API, a body that is not a message, a run that outlives ``--timeout``) comes out as one
:class:`LiveError` whose message is one sentence for the learner.

The tools are small local stand-ins for the course's task (list last quarter's tickets, label
them, publish a table), so a live run costs a few cents and touches nothing outside this folder.
Needs the SDK (``pip install anthropic``) and a credential the SDK accepts (``ANTHROPIC_API_KEY``
or ``ANTHROPIC_AUTH_TOKEN``); nothing here runs otherwise.
"""

from __future__ import annotations

import datetime
import functools
import importlib.util
import json
import os
import random
import re
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

# The one place the default model is named. Checked on 2026-11-30 against the SDK's model list and
# its deprecation table (anthropic 2.14): claude-sonnet-4-5 reached its end of life that day.
DEFAULT_MODEL = "claude-sonnet-5-5"
# Current models think before they answer, and thinking counts against max_tokens: 1024 cut replies
# short often enough (a publish_table call half written) to be a poor default.
DEFAULT_MAX_TOKENS = 4096
DEFAULT_TIMEOUT = 300.0  # seconds for the whole run: every call and every retry together
DEFAULT_RETRIES = 2  # tries again after a 429, a 5xx or a dropped connection, inside the timeout
MAX_MODEL_CALLS = 12
ONE_CALL_PER_TURN = {"type": "auto", "disable_parallel_tool_use": True}
CREDENTIAL_VARIABLES = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
INSTALL_HINT = "pip install anthropic        (or: pip install 'crashcourse[anthropic]')"


class LiveUnavailable(Exception):
    """The live path cannot run here (no SDK, or no credential); the message says what to do."""


class TooManyCalls(Exception):
    """The model kept asking for tools past the safety limit of a live run."""


class LiveError(Exception):
    """A model call failed for a reason outside the learner's loop; ``str()`` is one line for them.

    ``kind`` names the reason for code and tests: model, auth, refused, rate, server, overloaded,
    timeout, connection or malformed.
    """

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


# --- models ----------------------------------------------------------------------------------------


def deprecated_models() -> dict:
    """The installed SDK's table of deprecated model ids and their end-of-life dates (empty if unknown)."""
    try:
        from anthropic._data import DEPRECATED_MODELS  # a private module: older SDKs do not have it
    except Exception:  # noqa: BLE001
        return {}
    return dict(DEPRECATED_MODELS)


def known_models() -> tuple:
    """The model ids the installed SDK names in its ``Model`` type (any other id is still sent as is)."""
    try:
        import typing

        from anthropic.types.model import Model
    except Exception:  # noqa: BLE001
        return ()
    names: list = []
    for arg in typing.get_args(Model):
        names.extend(a for a in typing.get_args(arg) if isinstance(a, str))
    return tuple(names)


def _date_passed(text: str, today: Optional[datetime.date] = None) -> bool:
    """Whether a date the SDK writes as "November 30th, 2026" is today or earlier (False if unreadable)."""
    cleaned = re.sub(r"(\d+)(st|nd|rd|th)\b", r"\1", text.replace(",", " "))
    try:
        day = datetime.datetime.strptime(" ".join(cleaned.split()), "%B %d %Y").date()
    except ValueError:
        return False
    return day <= (today or datetime.date.today())


def model_note(model: str) -> Optional[str]:
    """A warning to show before the run when the SDK lists ``model`` as deprecated or does not name it, else None."""
    end = deprecated_models().get(model)
    if end is not None:
        when = "has been reached, so the API may already answer 404" if _date_passed(end) else \
            "is not here yet; after it the API answers 404"
        return (f"Note: the SDK lists {model} as deprecated: its end of life, {end}, {when}. Pick a current model "
                f"with --model (the kit's default is {DEFAULT_MODEL}).")
    known = known_models()
    if known and model not in known:
        # Not an error: a model newer than the installed SDK is sent all the same. But a typo shows here.
        return (f"Note: the installed SDK does not name {model!r} among its models (a typo, or a model newer than "
                "the SDK?). It is sent as it is; if the API answers 404, pick another with --model.")
    return None


# --- responses --------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_none=True)
    return value


def block_to_dict(block: Any) -> dict:
    """One content block as the protocol stores it: only the keys the API needs back."""
    data = _plain(block)
    if not isinstance(data, dict):
        raise _malformed(f"a content block is a {type(data).__name__}, not an object")
    kind = data.get("type")
    if kind == "text":
        return {"type": "text", "text": data.get("text", "")}
    if kind == "tool_use":
        if not isinstance(data.get("id"), str) or not isinstance(data.get("name"), str):
            raise _malformed("a tool_use block has no id or no name")
        return {"type": "tool_use", "id": data["id"], "name": data["name"], "input": data.get("input") or {}}
    return data  # thinking and other blocks go back to the API exactly as they came


def _malformed(what: str) -> LiveError:
    return LiveError("malformed", f"The API sent back something that is not a Messages API response ({what}). "
                                  "That is the API's fault (or a proxy's between you and it), not your loop's: "
                                  "try again in a minute.")


def response_to_dict(message: Any) -> dict:
    """An SDK ``Message`` (or a dict already) as a plain Messages-API dict: content, stop_reason, usage.

    Raises :class:`LiveError` (kind ``malformed``) when what came back is not a message: the SDK
    hands over whatever the body held when it cannot parse it, and a loop would otherwise fail on
    it with an error that points at the loop.
    """
    data = _plain(message)
    if not isinstance(data, dict):
        text = " ".join(str(data).split())
        what = "an HTML page" if text.lower().startswith(("<!doctype", "<html")) else "text"
        raise _malformed(f"the body is {what}, not JSON: {text[:60]!r}" if isinstance(data, str) else
                         f"the body is a JSON {type(data).__name__}, not an object")
    if data.get("type", "message") != "message":
        raise _malformed(f"its type is {data.get('type')!r}, not 'message'")
    if not isinstance(data.get("content"), list):
        raise _malformed("it has no content list")
    if not isinstance(data.get("stop_reason"), str):
        raise _malformed("it has no stop_reason")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return {
        "id": data.get("id"),
        "type": "message",
        "role": data.get("role", "assistant"),
        "model": data.get("model"),
        "stop_reason": data["stop_reason"],
        "content": [block_to_dict(b) for b in data["content"]],
        "usage": {k: int(usage[k]) for k in keys if isinstance(usage.get(k), (int, float))},
    }


# --- errors ------------------------------------------------------------------------------------------


def _api_message(exc: Any) -> str:
    text = getattr(exc, "api_message", None)
    if not text:
        body = getattr(exc, "body", None)
        if isinstance(body, dict):
            error = body.get("error")
            text = error.get("message") if isinstance(error, dict) else None
    return str(text or "").strip().replace("\n", " ")[:200]


def explain(exc: BaseException, model: str, *, timeout: float, attempts: int = 1) -> LiveError:
    """One :class:`LiveError` for an exception the SDK raised, in the learner's words."""
    import anthropic

    tries = f", {attempts} tries" if attempts > 1 else ""

    if isinstance(exc, LiveError):
        return exc
    if isinstance(exc, anthropic.APITimeoutError):
        return LiveError("timeout", f"The API did not answer within the run's time limit (--timeout {timeout:g} s, "
                                    "for the whole run). Try again, or give it longer with --timeout.")
    if isinstance(exc, anthropic.APIConnectionError):
        return LiveError("connection", f"Could not reach the API ({exc}{tries}). Check the network, or "
                                       "ANTHROPIC_BASE_URL if you set it.")
    if isinstance(exc, anthropic.APIResponseValidationError):
        return _malformed(str(exc)[:120])
    if isinstance(exc, anthropic.APIStatusError):
        status, detail = exc.status_code, _api_message(exc)
        kind = getattr(exc, "type", None) or ""
        said = f" The API said: {detail}" if detail else ""
        if (status == 404 or kind == "not_found_error") and ("model" in detail.lower() or not detail):
            end = deprecated_models().get(model)
            why = (f"the SDK lists it as deprecated, with end of life on {end}" if end else
                   "it may be retired or misspelt")
            return LiveError("model", f"The API does not know the model {model!r} (404 not_found_error): {why}. "
                                      f"Pick another with --model, e.g. --model {DEFAULT_MODEL}.{said}")
        if status == 404:
            return LiveError("refused", "The API answered 404 for /v1/messages: if you set ANTHROPIC_BASE_URL, "
                                        f"check it; otherwise the model {model!r} may be gone (pick another with "
                                        f"--model).{said}")
        if status == 401:
            return LiveError("auth", "The API refused the credential (401): check ANTHROPIC_API_KEY or "
                                     f"ANTHROPIC_AUTH_TOKEN.{said}")
        if status == 403:
            return LiveError("auth", f"The credential may not use this model or feature (403).{said}")
        if status == 429:
            return LiveError("rate", f"The API is rate-limiting this key (429{tries}). Wait a minute and run "
                                     f"again.{said}")
        if status == 529 or kind == "overloaded_error":
            return LiveError("overloaded", f"The API is overloaded ({status}{tries}). Nothing is wrong with your "
                                           f"loop: try again in a few minutes.{said}")
        if status >= 500:
            return LiveError("server", f"The API failed with an internal error ({status}{tries}). Nothing is "
                                       f"wrong with your loop: try again later.{said}")
        return LiveError("refused", f"The API refused the request ({status} {kind or 'error'}). A 400 here is "
                                    f"usually about the conversation your loop sent back.{said}")
    if isinstance(exc, (ValueError, UnicodeDecodeError)):  # a body the SDK could not decode as JSON
        return _malformed(f"{type(exc).__name__}: {str(exc)[:80]}")
    raise exc


def _retryable(exc: BaseException) -> bool:
    import anthropic

    if isinstance(exc, anthropic.APITimeoutError):
        return False  # the timeout was the run's whole remaining time: there is none left to retry in
    if isinstance(exc, anthropic.APIConnectionError):
        return True
    if isinstance(exc, anthropic.APIStatusError):
        should = exc.response.headers.get("x-should-retry") if exc.response is not None else None
        if should in ("true", "false"):
            return should == "true"
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return False


def _pause_before_retry(exc: BaseException, attempt: int) -> float:
    """Seconds to wait: the API's retry-after when it gives one (capped), else a doubling backoff."""
    response = getattr(exc, "response", None)
    header = response.headers.get("retry-after") if response is not None else None
    try:
        if header is not None:
            return max(0.0, min(float(header), 60.0))
    except ValueError:
        pass
    return min(0.5 * 2 ** attempt, 8.0) * (0.75 + random.random() / 2)


# --- the call_model a loop is given -----------------------------------------------------------------


class LiveModel:
    """``call_model(*, tools, messages)`` over ``client.messages.create``, returning plain dicts.

    ``parallel_tools=False`` sends :data:`ONE_CALL_PER_TURN`. The whole run shares one deadline,
    ``timeout`` seconds from the first call: each request is given what is left of it, and a retry
    is only made while some is left. The client should have ``max_retries=0``: the retries are
    made here, where the deadline is known.
    """

    def __init__(self, client: Any, model: str = DEFAULT_MODEL, *, max_tokens: int = DEFAULT_MAX_TOKENS,
                 parallel_tools: bool = False, timeout: float = DEFAULT_TIMEOUT, retries: int = DEFAULT_RETRIES,
                 max_calls: int = MAX_MODEL_CALLS, on_response: Optional[Callable[[dict], None]] = None,
                 system: Optional[str] = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1 (got {max_tokens})")
        self.client, self.model, self.max_tokens = client, model, max_tokens
        self.parallel_tools, self.timeout, self.retries = parallel_tools, timeout, retries
        self.max_calls, self.on_response, self.system = max_calls, on_response, system
        self.clock, self.sleep = clock, sleep
        self.deadline: Optional[float] = None
        self.calls = 0
        self.responses: list = []

    @property
    def last_response(self) -> Optional[dict]:
        return self.responses[-1] if self.responses else None

    def request_options(self) -> dict:
        """What every request carries besides the tools and the messages."""
        options: dict = {"model": self.model, "max_tokens": self.max_tokens}
        if not self.parallel_tools:
            options["tool_choice"] = dict(ONE_CALL_PER_TURN)
        if self.system:
            options["system"] = self.system
        return options

    def __call__(self, *, tools: Any, messages: Any, **_: Any) -> dict:
        if self.calls >= self.max_calls:
            raise TooManyCalls(f"the model was called {self.max_calls} times and still wanted tools; stopping the live "
                               "run so it cannot run up a bill")
        self.calls += 1
        if self.deadline is None:
            self.deadline = self.clock() + self.timeout
        options = self.request_options()
        attempt = 0
        while True:
            remaining = self.deadline - self.clock()
            if remaining <= 0:
                raise LiveError("timeout", f"The run used up its --timeout of {self.timeout:g} s before model call "
                                           f"{self.calls} could be made. Give it longer with --timeout.")
            try:
                with warnings.catch_warnings():
                    # The SDK warns of a deprecated model on every call; model_note says it once, before the run.
                    warnings.simplefilter("ignore", DeprecationWarning)
                    message = self.client.messages.create(tools=tools, messages=messages, timeout=remaining,
                                                          **options)
                response = response_to_dict(message)
                break
            except LiveError:
                raise
            except Exception as exc:  # noqa: BLE001 - sorted into one LiveError below
                if attempt < self.retries and _retryable(exc):
                    pause = _pause_before_retry(exc, attempt)
                    if self.clock() + pause < self.deadline:
                        attempt += 1
                        self.sleep(pause)
                        continue
                raise explain(exc, self.model, timeout=self.timeout, attempts=attempt + 1) from exc
        self.responses.append(response)
        if self.on_response is not None:
            self.on_response(response)
        return response


def make_call_model(client: Any, model: str = DEFAULT_MODEL, max_tokens: int = DEFAULT_MAX_TOKENS,
                    max_calls: int = MAX_MODEL_CALLS, on_response: Optional[Callable[[dict], None]] = None,
                    system: Optional[str] = None, **options: Any) -> LiveModel:
    """``call_model(*, tools, messages)`` over ``client.messages.create`` (a :class:`LiveModel`)."""
    return LiveModel(client, model, max_tokens=max_tokens, max_calls=max_calls, on_response=on_response,
                     system=system, **options)


# --- how a run ended ---------------------------------------------------------------------------------

STOP_WORDS = {
    "max_tokens": "the reply was cut off at max_tokens ({max_tokens}) before the model had finished. Try a larger "
                  "--max-tokens",
    "refusal": "the model declined to carry on (stop_reason refusal). Nothing in your loop caused this",
    "pause_turn": "the API paused a long turn (stop_reason pause_turn); a loop carries on by sending the "
                  "conversation back as it is, and yours took the pause for the end",
    "model_context_window_exceeded": "the conversation filled the model's context window",
    "stop_sequence": "the model hit a stop sequence",
}


def unfinished(response: Optional[dict], max_tokens: int) -> Optional[str]:
    """Why a run whose last response did not end with ``end_turn`` did not finish, or None if it did."""
    if response is None:
        return "the model was never called"
    reason = response.get("stop_reason")
    if reason == "end_turn":
        return None
    words = STOP_WORDS.get(reason, f"the model stopped with stop_reason {reason!r}, not 'end_turn'")
    return words.format(max_tokens=max_tokens)


# --- the course's task, with local tools ----------------------------------------------------------

ISSUE_WORDS = {"billing": ("charged", "invoice", "vat"), "login": ("sign in", "password"),
               "bug": ("crash", "garbled"), "feature request": ("please",), "shipping": ("parcel",),
               "refund": ("refund",)}
MONTHS = ("2026-07", "2026-08", "2026-09")


@dataclass
class TicketDesk:
    """Local stand-ins for the task's tools; ``published`` and ``emailed`` record what was posted."""

    seed: int = 0
    count: int = 24
    published: list = field(default_factory=list)
    emailed: list = field(default_factory=list)
    log: list = field(default_factory=list)

    def __post_init__(self) -> None:
        rng = random.Random(self.seed)
        subjects = ["Charged twice", "Can't sign in", "Export crashes", "Dark mode please", "Parcel late",
                    "Refund not received", "Password reset loop", "Invoice shows wrong VAT"]
        self.tickets = [{"id": f"T-{4000 + i}", "subject": rng.choice(subjects), "opened": MONTHS[i % 3]}
                        for i in range(self.count)]

    def label(self, subject: str) -> str:
        low = subject.lower()
        return next((kind for kind, words in ISSUE_WORDS.items() if any(w in low for w in words)), "other")

    def __call__(self, name: str, tool_input: Any, **_: Any) -> str:
        self.log.append((name, tool_input))
        tool_input = tool_input if isinstance(tool_input, dict) else {}
        if name == "list_tickets":
            month = tool_input.get("month")
            return json.dumps([t for t in self.tickets if not month or t["opened"] == month])
        if name == "classify_tickets":
            by_id = {t["id"]: t for t in self.tickets}
            ids = tool_input.get("ticket_ids") or list(by_id)
            return json.dumps({i: self.label(by_id[i]["subject"]) if i in by_id else "unknown ticket" for i in ids})
        if name == "publish_table":
            self.published.append(str(tool_input.get("markdown", "")))
            return json.dumps({"posted": True, "message_id": f"local_{len(self.published)}"})
        if name == "email_summary":
            self.emailed.append((str(tool_input.get("to", "")), str(tool_input.get("body", ""))))
            return json.dumps({"sent": True, "recipients": 1})
        return json.dumps({"error": f"there is no tool named {name}"})


def task_tools(parallel: bool) -> list:
    """The tools a live run offers: the course's three, or for the parallel level the month-by-month set."""
    if parallel:
        from grader.levels.parallel_calls import TOOLS
    else:
        from grader.engine.scripted import TICKET_TOOLS as TOOLS
    return json.loads(json.dumps(TOOLS))


# --- availability -----------------------------------------------------------------------------------


def check_available(env: Optional[dict] = None) -> None:
    """Raise :class:`LiveUnavailable` saying what is missing for a live run."""
    env = os.environ if env is None else env
    try:
        # find_spec, not import: importing the SDK takes a while, and this is only a question.
        installed = importlib.util.find_spec("anthropic") is not None
    except (ImportError, ValueError):
        installed = False
    if not installed:
        raise LiveUnavailable("The live path needs the Anthropic SDK, which is not installed here. Install it with\n"
                              f"    {INSTALL_HINT}\n"
                              "then set ANTHROPIC_API_KEY and run this again. Without it, `crashcourse run N` "
                              "(no --live) drives your loop with the scripted model.")
    if not any(env.get(name) for name in CREDENTIAL_VARIABLES) and not _sdk_finds_credentials(env):
        raise LiveUnavailable("The live path needs a credential: set ANTHROPIC_API_KEY (from console.anthropic.com) "
                              "or ANTHROPIC_AUTH_TOKEN, and run this again. Without one, `crashcourse run N` "
                              "(no --live) drives your loop with the scripted model.")


def _sdk_finds_credentials(env: Any) -> bool:
    """Whether the SDK would find a credential of its own (a profile, workload identity) in ``env``."""
    if env is not os.environ:
        return False  # a test's own environment: only the variables count
    try:
        import anthropic

        client = anthropic.Anthropic(max_retries=0)
    except Exception:  # noqa: BLE001
        return False
    return any(getattr(client, name, None) for name in ("api_key", "auth_token", "credentials"))


def default_client() -> Any:
    """A client for the live path: credentials and ANTHROPIC_BASE_URL as the SDK reads them, no SDK retries."""
    check_available()
    return _client_for(tuple(os.environ.get(name) for name in (*CREDENTIAL_VARIABLES, "ANTHROPIC_BASE_URL")))


@functools.lru_cache(maxsize=4)
def _client_for(environment: tuple) -> Any:
    # One client per configuration and process: building one sets up TLS, which takes a noticeable
    # fraction of a second, and a process that runs several loops (the kit's tests) needs only one.
    import anthropic

    return anthropic.Anthropic(max_retries=0)


def run_live(run_agent: Callable, *, client: Any, directory: str, model: str = DEFAULT_MODEL,
             desk: Optional[TicketDesk] = None, max_tokens: int = DEFAULT_MAX_TOKENS,
             on_response: Optional[Callable[[dict], None]] = None,
             on_tool: Optional[Callable[[str, str], None]] = None, parallel_tools: bool = False,
             timeout: float = DEFAULT_TIMEOUT, retries: int = DEFAULT_RETRIES,
             call_model: Optional[LiveModel] = None) -> tuple[Any, TicketDesk]:
    """Run a learner's ``run_agent`` on the course's task against ``client`` (a real SDK client).

    Pass ``call_model`` (a :class:`LiveModel`) to read afterwards how the model's last reply ended.
    """
    from grader.engine.scripted import TICKET_TASK

    desk = desk or TicketDesk()
    if call_model is None:
        call_model = LiveModel(client, model, max_tokens=max_tokens, on_response=on_response,
                               parallel_tools=parallel_tools, timeout=timeout, retries=retries)

    def execute_tool(name: str, tool_input: Any, **_: Any) -> str:
        result = desk(name, tool_input)
        if on_tool is not None:
            on_tool(name, result)
        return result

    state = run_agent(TICKET_TASK, task_tools(call_model.parallel_tools), call_model, execute_tool, directory)
    return state, desk
