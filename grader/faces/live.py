"""Drive a learner's loop with the real Messages API (``crashcourse run N --live``).

The loop under test only ever sees plain dicts: ``call_model(*, tools, messages) -> dict`` in
the Messages API shape of DESIGN §3. :func:`make_call_model` wraps the official ``anthropic``
client so that holds with a real model too: the SDK returns pydantic models, and
:func:`response_to_dict` turns one into the same dict the scripted model hands out.

The tools are small local stand-ins for the course's task (list last quarter's tickets, label
them, publish a table), so a live run costs a few cents and touches nothing outside this folder.
Needs ``pip install -e '.[anthropic]'`` and ``ANTHROPIC_API_KEY``; nothing here runs otherwise.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

DEFAULT_MODEL = "claude-sonnet-4-5"
MAX_MODEL_CALLS = 12


class LiveUnavailable(Exception):
    """The live path cannot run here (no SDK, or no key); the message says what to do."""


class TooManyCalls(Exception):
    """The model kept asking for tools past the safety limit of a live run."""


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_none=True)
    return value


def block_to_dict(block: Any) -> dict:
    """One content block as the protocol stores it: only the keys the API needs back."""
    data = _plain(block)
    kind = data.get("type")
    if kind == "text":
        return {"type": "text", "text": data.get("text", "")}
    if kind == "tool_use":
        return {"type": "tool_use", "id": data["id"], "name": data["name"], "input": data.get("input") or {}}
    return data  # thinking and other blocks go back to the API as they came


def response_to_dict(message: Any) -> dict:
    """An SDK ``Message`` (or a dict already) as a plain Messages-API dict: content, stop_reason, usage."""
    data = _plain(message)
    usage = data.get("usage") or {}
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return {
        "id": data.get("id"),
        "type": data.get("type", "message"),
        "role": data.get("role", "assistant"),
        "model": data.get("model"),
        "stop_reason": data.get("stop_reason"),
        "content": [block_to_dict(b) for b in data.get("content") or []],
        "usage": {k: int(usage[k]) for k in keys if usage.get(k) is not None},
    }


def make_call_model(client: Any, model: str = DEFAULT_MODEL, max_tokens: int = 1024,
                    max_calls: int = MAX_MODEL_CALLS, on_response: Optional[Callable[[dict], None]] = None,
                    system: Optional[str] = None) -> Callable[..., dict]:
    """``call_model(*, tools, messages)`` over ``client.messages.create``, returning plain dicts."""
    calls = {"n": 0}

    def call_model(*, tools: Any, messages: Any, **_: Any) -> dict:
        if calls["n"] >= max_calls:
            raise TooManyCalls(f"the model was called {max_calls} times and still wanted tools; stopping the live run "
                               "so it cannot run up a bill")
        calls["n"] += 1
        extra = {"system": system} if system else {}
        message = client.messages.create(model=model, max_tokens=max_tokens, tools=tools, messages=messages, **extra)
        response = response_to_dict(message)
        if on_response is not None:
            on_response(response)
        return response

    return call_model


# --- the course's task, with local tools ----------------------------------------------------------

ISSUE_WORDS = {"billing": ("charged", "invoice", "vat"), "login": ("sign in", "password"),
               "bug": ("crash", "garbled"), "feature request": ("please",), "shipping": ("parcel",),
               "refund": ("refund",)}


@dataclass
class TicketDesk:
    """Local stand-ins for the task's three tools; ``published`` records every table posted."""

    seed: int = 0
    count: int = 24
    published: list = field(default_factory=list)
    log: list = field(default_factory=list)

    def __post_init__(self) -> None:
        rng = random.Random(self.seed)
        subjects = ["Charged twice", "Can't sign in", "Export crashes", "Dark mode please", "Parcel late",
                    "Refund not received", "Password reset loop", "Invoice shows wrong VAT"]
        self.tickets = [{"id": f"T-{4000 + i}", "subject": rng.choice(subjects)} for i in range(self.count)]

    def label(self, subject: str) -> str:
        low = subject.lower()
        return next((kind for kind, words in ISSUE_WORDS.items() if any(w in low for w in words)), "other")

    def __call__(self, name: str, tool_input: Any) -> str:
        self.log.append((name, tool_input))
        tool_input = tool_input if isinstance(tool_input, dict) else {}
        if name == "list_tickets":
            return json.dumps(self.tickets)
        if name == "classify_tickets":
            by_id = {t["id"]: t for t in self.tickets}
            ids = tool_input.get("ticket_ids") or list(by_id)
            return json.dumps({i: self.label(by_id[i]["subject"]) if i in by_id else "unknown ticket" for i in ids})
        if name == "publish_table":
            self.published.append(str(tool_input.get("markdown", "")))
            return json.dumps({"posted": True, "message_id": f"local_{len(self.published)}"})
        return json.dumps({"error": f"there is no tool named {name}"})


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
                              "    pip install -e '.[anthropic]'\n"
                              "then set ANTHROPIC_API_KEY and run this again. Without it, `crashcourse run N` "
                              "(no --live) drives your loop with the scripted model.")
    if not env.get("ANTHROPIC_API_KEY"):
        raise LiveUnavailable("The live path needs an API key: set ANTHROPIC_API_KEY (from console.anthropic.com) "
                              "and run this again. Without one, `crashcourse run N` (no --live) drives your loop "
                              "with the scripted model.")


def default_client() -> Any:
    check_available()
    import anthropic

    return anthropic.Anthropic()


def run_live(run_agent: Callable, *, client: Any, directory: str, model: str = DEFAULT_MODEL,
             desk: Optional[TicketDesk] = None, max_tokens: int = 1024,
             on_response: Optional[Callable[[dict], None]] = None,
             on_tool: Optional[Callable[[str, str], None]] = None) -> tuple[Any, TicketDesk]:
    """Run a learner's ``run_agent`` on the course's task against ``client`` (a real or mocked SDK client)."""
    from grader.engine.scripted import TICKET_TASK, TICKET_TOOLS

    desk = desk or TicketDesk()
    call_model = make_call_model(client, model, max_tokens=max_tokens, on_response=on_response)

    def execute_tool(name: str, tool_input: Any) -> str:
        result = desk(name, tool_input)
        if on_tool is not None:
            on_tool(name, result)
        return result

    tools = json.loads(json.dumps(TICKET_TOOLS))
    state = run_agent(TICKET_TASK, tools, call_model, execute_tool, directory)
    return state, desk
