"""A local stand-in for the Messages API, for testing the live path through the real ``anthropic`` SDK.

:class:`StandIn` is a small HTTP server on 127.0.0.1 (stdlib ``http.server``, in a thread). Point
the SDK at it with ``ANTHROPIC_BASE_URL`` and it answers ``POST /v1/messages`` the way the API
does, as far as a tool loop can tell:

* It checks each request as the API would and answers 400 ``invalid_request_error`` (or 404
  ``not_found_error`` for a model it does not know) with the API's kind of message: a credential
  header, ``max_tokens`` of at least 1, messages that start with the user and alternate, content
  blocks of known types with exactly their keys, every ``tool_use`` answered by a
  ``tool_result`` at the start of the very next user message (and no result without its call),
  tool names among the tools sent, and thinking blocks handed back as they were given.
* It plays the course's task like a model that reads the conversation: list the tickets, label
  them, publish the table (and email it, when that tool is offered), then answer. Where the
  request allows it, it asks for several tools in one turn (three months listed at once, two
  batches labelled at once); with ``disable_parallel_tool_use`` it asks for one per turn.
* ``faults`` replaces the answer to the request with that index (0 for the first HTTP request the
  server gets, retries included) by a failure: :func:`stop` (a reply that ends with another
  stop_reason), :func:`status` (429, 500, 529 ...), :func:`raw` (an HTML page, a JSON document cut
  short, a message without ``content``) or :func:`hang` (no answer until the client gives up).

Every request is kept in ``requests`` (the parsed body and headers), every 400 the stand-in gave in
``rejections``, and every usage it reported in ``usages``, so a test can compare the checkpoint's
``tokensUsed`` with what the "API" really billed.

To try the live path by hand, with no network and no key::

    python tests/messages_standin.py --fault 2:max_tokens     # prints the two variables to export
    crashcourse run 2 --live                                   # in another shell, with them set
"""

from __future__ import annotations

import http.server
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

KNOWN_MODELS = frozenset({"claude-sonnet-5-5", "claude-haiku-5-5", "claude-opus-5-5", "claude-sonnet-5",
                          "claude-haiku-4-5", "claude-test"})
BLOCK_KEYS = {
    "text": ({"type", "text"}, {"cache_control", "citations"}),
    "tool_use": ({"type", "id", "name", "input"}, {"cache_control"}),
    "tool_result": ({"type", "tool_use_id"}, {"content", "is_error", "cache_control"}),
    "thinking": ({"type", "thinking", "signature"}, set()),
    "redacted_thinking": ({"type", "data"}, set()),
}


class Rejected(Exception):
    def __init__(self, status: int, kind: str, message: str):
        super().__init__(message)
        self.status, self.kind = status, kind


# --- faults ------------------------------------------------------------------------------------------


@dataclass
class Fault:
    kind: str
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict = field(default_factory=dict)
    stop_reason: str = ""
    seconds: float = 0.0


def stop(reason: str) -> Fault:
    """Answer with a message that ends with ``reason`` (max_tokens cuts a tool call off halfway)."""
    return Fault("stop", stop_reason=reason)


def status(code: int, kind: str, message: str = "", retry_after: Optional[str] = "0") -> Fault:
    """An API error: ``{"type": "error", "error": {"type": kind, "message": ...}}`` with ``code``."""
    body = json.dumps({"type": "error", "error": {"type": kind, "message": message or kind}}).encode()
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    return Fault("status", status=code, body=body, headers=headers)


def raw(body: bytes, content_type: str = "application/json", code: int = 200) -> Fault:
    """A body sent as is: an HTML error page from a proxy, a JSON document cut short, ..."""
    return Fault("raw", status=code, body=body, content_type=content_type)


def hang(seconds: float = 10.0) -> Fault:
    """No answer for ``seconds`` (or until the stand-in stops), then the connection is closed."""
    return Fault("hang", seconds=seconds)


HTML_PAGE = raw(b"<html><head><title>502 Bad Gateway</title></head><body>bad gateway</body></html>", "text/html")
CUT_JSON = raw(b'{"id": "msg_cut", "type": "message", "role": "assistant", "content": [{"type": "te')
NO_CONTENT = raw(json.dumps({"id": "msg_x", "type": "message", "role": "assistant", "model": "claude-test",
                             "stop_reason": "end_turn", "stop_sequence": None,
                             "usage": {"input_tokens": 5, "output_tokens": 1}}).encode())


# --- validation, as the API does it ------------------------------------------------------------------


def _bad(message: str) -> Rejected:
    return Rejected(400, "invalid_request_error", message)


def _blocks(content: Any, where: str) -> list:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise _bad(f"{where}.content: Input should be a valid list or string")
    for j, block in enumerate(content):
        if not isinstance(block, dict) or block.get("type") not in BLOCK_KEYS:
            kind = block.get("type") if isinstance(block, dict) else type(block).__name__
            raise _bad(f"{where}.content.{j}: Input tag {kind!r} found using 'type' does not match any of the "
                       "expected tags")
        required, optional = BLOCK_KEYS[block["type"]]
        missing, extra = required - set(block), set(block) - required - optional
        if missing:
            raise _bad(f"{where}.content.{j}.{block['type']}.{sorted(missing)[0]}: Field required")
        if extra:
            raise _bad(f"{where}.content.{j}.{block['type']}.{sorted(extra)[0]}: Extra inputs are not permitted")
        if block["type"] == "tool_use" and not isinstance(block["input"], dict):
            raise _bad(f"{where}.content.{j}.tool_use.input: Input should be a valid dictionary")
        if block["type"] == "text" and not isinstance(block["text"], str):
            raise _bad(f"{where}.content.{j}.text.text: Input should be a valid string")
    return content


def validate(body: Any, headers: Any, signatures: dict) -> None:
    """Raise :class:`Rejected` for a request the Messages API would refuse."""
    if not (headers.get("x-api-key") or (headers.get("authorization") or "").startswith("Bearer ")):
        raise Rejected(401, "authentication_error", "x-api-key header is required")
    if not headers.get("anthropic-version"):
        raise _bad("anthropic-version: header is required")
    if not isinstance(body, dict):
        raise _bad("The request body is not valid JSON")
    model = body.get("model")
    if not isinstance(model, str):
        raise _bad("model: Field required")
    if model not in KNOWN_MODELS:
        raise Rejected(404, "not_found_error", f"model: {model}")
    max_tokens = body.get("max_tokens")
    if type(max_tokens) is not int or max_tokens < 1:
        raise _bad("max_tokens: Input should be greater than or equal to 1")
    tools = body.get("tools") or []
    names = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or \
                not isinstance(tool.get("input_schema"), dict) or tool["input_schema"].get("type") != "object":
            raise _bad(f"tools.{i}: a custom tool needs a name and an input_schema of type object")
        if tool["name"] in names:
            raise _bad("tools: Tool names must be unique.")
        names.add(tool["name"])
    choice = body.get("tool_choice")
    if choice is not None:
        if not isinstance(choice, dict) or choice.get("type") not in ("auto", "any", "tool", "none"):
            raise _bad("tool_choice: Input tag does not match any of the expected tags")
        if not isinstance(choice.get("disable_parallel_tool_use", False), bool):
            raise _bad("tool_choice.disable_parallel_tool_use: Input should be a valid boolean")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("messages: at least one message is required")
    seen_ids: set = set()
    for i, message in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(message, dict):
            raise _bad(f"{where}: Input should be a valid dictionary")
        for key in sorted({"role", "content"} - set(message)):
            raise _bad(f"{where}.{key}: Field required")
        for key in sorted(set(message) - {"role", "content"}):
            raise _bad(f"{where}.{key}: Extra inputs are not permitted")
        want = "user" if i % 2 == 0 else "assistant"
        if message["role"] != want:
            raise _bad(f"{where}: roles must alternate between \"user\" and \"assistant\", starting with \"user\" "
                       f"(got {message['role']!r})")
        blocks = _blocks(message["content"], where)
        if message["role"] == "assistant":
            if any(b["type"] == "tool_result" for b in blocks):
                raise _bad(f"{where}: tool_result blocks belong in user messages")
            for b in blocks:
                if b["type"] == "thinking" and signatures.get(b["signature"]) != b["thinking"]:
                    raise _bad(f"{where}: Invalid `signature` in `thinking` block")
            calls = [b for b in blocks if b["type"] == "tool_use"]
            for b in calls:
                if b["id"] in seen_ids:
                    raise _bad(f"{where}: `tool_use` ids must be unique")
                seen_ids.add(b["id"])
                if b["name"] not in names:
                    raise _bad(f"{where}: tool_use names the tool {b['name']!r}, which is not among the tools sent")
            if calls:
                after = _blocks(messages[i + 1]["content"], f"messages.{i + 1}") if i + 1 < len(messages) else []
                leading = []
                for b in after:
                    if b["type"] != "tool_result":
                        break
                    leading.append(b["tool_use_id"])
                missing = [b["id"] for b in calls if b["id"] not in leading]
                if missing:
                    raise _bad(f"{where}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                               f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` "
                               "block in the next message.")
        else:
            previous = [] if i == 0 else [b["id"] for b in _blocks(messages[i - 1]["content"], f"messages.{i - 1}")
                                          if b["type"] == "tool_use"]
            answered = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
            stray = [t for t in answered if t not in previous]
            if stray:
                raise _bad(f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {stray[0]}. Each "
                           "`tool_result` block must have a corresponding `tool_use` block in the previous message.")
            if len(set(answered)) != len(answered):
                raise _bad(f"{where}: each tool_use may be answered by one tool_result only")
    if messages[-1]["role"] != "user":
        raise _bad("messages: the final message must be the user's (this stand-in does not take prefill)")


# --- the model it plays ------------------------------------------------------------------------------


def _tool_results(messages: list) -> dict:
    found = {}
    for message in messages:
        if message["role"] == "user" and isinstance(message["content"], list):
            for b in message["content"]:
                if b.get("type") == "tool_result":
                    found[b["tool_use_id"]] = b.get("content")
    return found


def plan(tools: list, parallel: bool) -> list:
    """The calls the task takes, as turns; each call is ``(name, input)`` or a callable of the results so far."""
    names = {t["name"] for t in tools}
    by_month = any("month" in (t.get("input_schema", {}).get("properties") or {}) for t in tools
                   if t["name"] == "list_tickets")
    turns: list = []
    if by_month:
        turns.append([("list_tickets", {"month": m}) for m in ("2026-07", "2026-08", "2026-09")])
    else:
        turns.append([("list_tickets", {"quarter": "2026-Q3"})])

    def batch(half: int) -> Callable[[dict], tuple]:
        def call(ids: list) -> tuple:
            cut = len(ids) // 2
            return ("classify_tickets", {"ticket_ids": ids[:cut] if half == 0 else ids[cut:]})
        return call

    turns.append([batch(0), batch(1)])
    last = [("publish_table", "table")]
    if "email_summary" in names:
        last.append(("email_summary", "table"))
    turns.append(last)
    if not parallel:
        turns = [[call] for turn in turns for call in turn]
    return turns


class TicketPlayer:
    """Answers a request for the course's task from the conversation in it, like a stateless model."""

    def __init__(self, thinking: bool = False):
        self.thinking = thinking
        self.counter = 0

    def next_id(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}_{self.counter:04d}"

    def reply(self, body: dict, signatures: dict) -> dict:
        messages = body["messages"]
        choice = body.get("tool_choice") or {}
        parallel = not choice.get("disable_parallel_tool_use", False)
        turns = plan(body.get("tools") or [], parallel)
        done = sum(1 for m in messages if m["role"] == "assistant")
        results = _tool_results(messages)
        ids: list = []
        labels: dict = {}
        for value in results.values():
            try:
                data = json.loads(value) if isinstance(value, str) else None
            except ValueError:
                data = None
            if isinstance(data, list):
                ids.extend(t["id"] for t in data if isinstance(t, dict) and "id" in t)
            elif isinstance(data, dict) and all(isinstance(v, str) for v in data.values()):
                labels.update(data)
        content: list = []
        if self.thinking:
            text = f"step {done}: what next?"
            signature = self.next_id("sig")
            signatures[signature] = text
            content.append({"type": "thinking", "thinking": text, "signature": signature})
        if done >= len(turns):
            counts: dict = {}
            for label in labels.values():
                counts[label] = counts.get(label, 0) + 1
            content.append({"type": "text", "text": f"Done: {len(labels)} tickets sorted into {len(counts)} types."})
            return self._message(content, "end_turn", messages)
        table = "| issue type | tickets |\n|---|---|\n" + "".join(
            f"| {k} | {sum(1 for v in labels.values() if v == k)} |\n" for k in sorted(set(labels.values())))
        content.append({"type": "text", "text": f"Step {done + 1} of the task."})
        for call in turns[done]:
            name, tool_input = call(sorted(ids)) if callable(call) else call
            if tool_input == "table":
                tool_input = {"title": "Q3 tickets by issue type", "markdown": table} if name == "publish_table" \
                    else {"to": "support-leads@example.com", "body": table}
            content.append({"type": "tool_use", "id": self.next_id("toolu"), "name": name, "input": tool_input})
        return self._message(content, "tool_use", messages)

    def _message(self, content: list, stop_reason: str, messages: list) -> dict:
        history = len(json.dumps(messages))
        return {"id": self.next_id("msg"), "type": "message", "role": "assistant", "model": "claude-test",
                "content": content, "stop_reason": stop_reason, "stop_sequence": None,
                "usage": {"input_tokens": history // 4, "output_tokens": 20 + 10 * len(content),
                          "cache_read_input_tokens": history // 8, "cache_creation_input_tokens": 0}}


def _cut(message: dict, reason: str) -> dict:
    """``message`` as the API sends it when it stops for ``reason`` instead."""
    message = json.loads(json.dumps(message))
    message["stop_reason"] = reason
    if reason == "max_tokens":
        # Cut inside the last tool call: the API hands over the block it was writing, unfinished.
        for block in reversed(message["content"]):
            if block["type"] == "tool_use":
                block["input"] = {}
                break
    elif reason == "refusal":
        message["content"] = [{"type": "text", "text": "I can't help with that."}]
    elif reason == "pause_turn":
        message["content"] = [b for b in message["content"] if b["type"] != "tool_use"]
    return message


# --- the server --------------------------------------------------------------------------------------


class _Handler(http.server.BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.1"

    def log_message(self, *_: Any) -> None:  # keep test output clean
        pass

    def do_POST(self) -> None:  # noqa: N802 - the name http.server looks for
        stand_in = self.server.stand_in
        length = int(self.headers.get("content-length") or 0)
        raw_body = self.rfile.read(length)
        try:
            body = json.loads(raw_body)
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        with stand_in.lock:
            index = len(stand_in.requests)
            stand_in.requests.append({"path": self.path, "body": body, "headers": headers})
            fault = stand_in.faults.get(index)
        if self.path.split("?")[0] != "/v1/messages":
            return self._send(404, {"type": "error", "error": {"type": "not_found_error", "message": "Not found"}})
        if fault is not None and fault.kind == "hang":
            stand_in.released.wait(fault.seconds)
            self.close_connection = True
            return
        if fault is not None and fault.kind in ("status", "raw"):
            return self._send_bytes(fault.status, fault.body, fault.content_type, fault.headers)
        try:
            with stand_in.lock:
                validate(body, headers, stand_in.signatures)
                message = stand_in.player.reply(body, stand_in.signatures)
        except Rejected as exc:
            with stand_in.lock:
                stand_in.rejections.append(str(exc))
            return self._send(exc.status, {"type": "error", "error": {"type": exc.kind, "message": str(exc)}})
        if fault is not None and fault.kind == "stop":
            message = _cut(message, fault.stop_reason)
        with stand_in.lock:
            stand_in.usages.append(message["usage"])
            stand_in.replies.append(message)
        self._send(200, message)

    def _send(self, code: int, data: dict) -> None:
        self._send_bytes(code, json.dumps(data).encode(), "application/json", {})

    def _send_bytes(self, code: int, data: bytes, content_type: str, headers: dict) -> None:
        self.send_response(code)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", f"req_standin_{code}")
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    stand_in: "StandIn"


class StandIn:
    """The stand-in as a context manager: ``with StandIn() as api: ... api.url ...``."""

    def __init__(self, faults: Optional[dict] = None, *, thinking: bool = False):
        self.faults = dict(faults or {})
        self.player = TicketPlayer(thinking=thinking)
        self.requests: list = []
        self.rejections: list = []
        self.usages: list = []
        self.replies: list = []
        self.signatures: dict = {}
        self.lock = threading.Lock()
        self.released = threading.Event()
        self._server: Optional[_Server] = None
        self._thread: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        assert self._server is not None, "the stand-in is not running"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "StandIn":
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.stand_in = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="messages-standin", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.released.set()  # a hanging request ends now
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "StandIn":
        return self.start()

    def __exit__(self, *_: Any) -> None:
        self.stop()

    def bodies(self) -> list:
        return [r["body"] for r in self.requests]

    def billed(self) -> int:
        """Tokens of every reply served, counted the protocol's way (all four usage numbers)."""
        return sum(sum(v for v in u.values() if isinstance(v, int)) for u in self.usages)


def main(argv: Optional[list] = None) -> int:
    """Serve the stand-in by hand, to try ``crashcourse run N --live`` with no network and no key."""
    import argparse
    import time

    parser = argparse.ArgumentParser(description="A local stand-in for the Messages API (for trying run --live).")
    parser.add_argument("--thinking", action="store_true", help="start each reply with a signed thinking block")
    parser.add_argument("--fault", action="append", default=[], metavar="N:KIND",
                        help="answer request N (from 0) with KIND: max_tokens, refusal, pause_turn, 429, 500, 529, "
                             "html, cut, no-content or hang")
    parser.add_argument("--seconds", type=float, default=600, help="stop by itself after this long (default 600)")
    args = parser.parse_args(argv)
    kinds = {"max_tokens": stop("max_tokens"), "refusal": stop("refusal"), "pause_turn": stop("pause_turn"),
             "429": status(429, "rate_limit_error"), "500": status(500, "api_error"),
             "529": status(529, "overloaded_error"), "html": HTML_PAGE, "cut": CUT_JSON, "no-content": NO_CONTENT,
             "hang": hang(args.seconds)}
    faults = {}
    for spec in args.fault:
        index, _, kind = spec.partition(":")
        if kind not in kinds or not index.isdigit():
            parser.error(f"--fault {spec}: write N:KIND with KIND one of {', '.join(kinds)}")
        faults[int(index)] = kinds[kind]
    with StandIn(faults, thinking=args.thinking) as api:
        print(f"export ANTHROPIC_BASE_URL={api.url} ANTHROPIC_API_KEY=stand-in", flush=True)
        try:
            time.sleep(args.seconds)
        except KeyboardInterrupt:
            pass
        print(f"{len(api.requests)} requests, {len(api.rejections)} refused", *api.rejections, sep="\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
