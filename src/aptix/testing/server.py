"""A scripted OpenAI-compatible HTTP server on 127.0.0.1, for exercising real clients.

It answers ``POST /v1/chat/completions`` and ``POST /v1/responses`` from a script of
:class:`~aptix.llm.types.LlmResponse` values (see :func:`aptix.testing.reply`; a
``finish_reason`` of ``length`` or ``content_filter`` is sent as each API says it), streamed
when the request asks (``"stream": true``: Chat Completions chunks, or the Responses API's
events: ``response.created``, ``response.output_text.delta``, ... ``response.completed``), scripted
HTTP failures (:class:`Fail`), Responses API answers that hold none (:class:`Unfinished`),
unreadable answers (:class:`Raw`), delays (:class:`Delay`)
and answers held until the test releases them (:class:`Hold`), then from an optional
``respond`` function, and records every request body.
It uses only the standard library, so it starts in milliseconds in any test.

``python -m aptix.testing.server`` runs one from the command line (see
:mod:`aptix.testing.server_cli`).
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aptix.llm.types import LlmResponse

__all__ = ["Delay", "Fail", "Hold", "Raw", "ScriptedOpenAIServer", "Unfinished"]


@dataclass(frozen=True, slots=True)
class Fail:
    """Answer with HTTP ``status`` and an OpenAI-style error body."""

    status: int
    message: str = "scripted failure"


@dataclass(frozen=True, slots=True)
class Unfinished:
    """A Responses API answer (HTTP 200) with no output and a ``status`` that is no answer.

    ``failed`` carries ``error`` ``{"code": code, "message": message}``; ``cancelled``,
    ``queued`` and ``in_progress`` carry none. Streamed, ``failed`` ends with a
    ``response.failed`` event; any other status is one ``response.created`` event holding it,
    and the stream ends there, as one broken off does. Chat Completions knows no such answer:
    a request to it gets HTTP 500 with ``message``.
    """

    status: str = "failed"
    message: str = "The server had an error while processing your request."
    code: str = "server_error"


@dataclass(frozen=True, slots=True)
class Raw:
    """Answer HTTP 200 with ``body`` as it is (a stream request gets it as its event stream).

    A model endpoint that sends what no client can read: a body that is not JSON, or a
    stream whose event is cut short.
    """

    body: bytes


@dataclass(frozen=True, slots=True)
class Delay:
    """Wait ``seconds`` before answering with ``then``."""

    seconds: float
    then: LlmResponse | Fail | Raw


@dataclass(frozen=True, slots=True)
class Hold:
    """Answer with ``then`` only once :meth:`ScriptedOpenAIServer.release` is called.

    A slow model without a clock: the test decides when (or whether) it answers. If the
    server stops first, the held request is dropped without an answer. ``after_words``: a
    streamed answer (Chat Completions or Responses) sends that many words of ``then``'s text
    first, and holds the rest (a model stopped mid-answer; the test reads the words it
    streamed).
    """

    then: LlmResponse | Fail | Raw
    after_words: int = 0


Step = LlmResponse | Fail | Raw | Delay | Hold | Unfinished


@dataclass
class ScriptedOpenAIServer:
    """Start with ``with ScriptedOpenAIServer([...]) as server:``; use ``server.base_url``."""

    script: list[Step] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    #: The HTTP headers of every request, names in lower case.
    headers: list[dict[str, str]] = field(default_factory=list)
    api_key: str | None = None
    #: Answers requests once the script is used up (called in the server's threads).
    respond: Callable[[dict[str, Any]], Step] | None = None
    #: Where to listen; port 0 picks a free one.
    host: str = "127.0.0.1"
    port: int = 0
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _arrived: threading.Condition = field(default_factory=threading.Condition)
    _released: threading.Event = field(default_factory=threading.Event)
    _stopped: threading.Event = field(default_factory=threading.Event)

    @property
    def base_url(self) -> str:
        """The ``/v1`` base URL to give an OpenAI client."""
        assert self._server is not None, "the server is not running"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def add(self, *steps: Step) -> None:
        """Queue more scripted answers."""
        with self._lock:
            self.script.extend(steps)

    def release(self) -> None:
        """Let every :class:`Hold` answer, those waiting now and those still to come."""
        self._released.set()

    def wait_for_requests(self, count: int, timeout: float = 60.0) -> None:
        """Block until ``count`` requests have arrived (AssertionError after ``timeout`` s)."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self.requests) >= count, timeout):
                raise AssertionError(
                    f"{len(self.requests)} request(s) arrived within {timeout:g} s, not {count}."
                )

    def assert_complete(self) -> None:
        """Fail if scripted answers were never requested."""
        if self.script:
            raise AssertionError(f"{len(self.script)} scripted answer(s) were not used.")

    def start(self) -> ScriptedOpenAIServer:
        """Bind :attr:`host` and :attr:`port` (a free port by default); serve in a thread."""
        self._stopped.clear()
        self._server = _QuietServer((self.host, self.port), _handler(self))
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port."""
        self._stopped.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ScriptedOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> Step:
        with self._lock:
            self.paths.append(path)
            self.requests.append(body)
            self.headers.append(headers)
            step = self.script.pop(0) if self.script else None
        with self._arrived:
            self._arrived.notify_all()
        if step is not None:
            return step
        if self.respond is not None:
            return self.respond(body)
        return Fail(500, "the scripted server ran out of answers")


class _QuietServer(ThreadingHTTPServer):
    """A client hanging up mid-answer is what tests of cancels do: no traceback for it."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Print the traceback of a real failure; a closed connection is not one."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _handler(owner: ScriptedOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet in tests
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if owner.api_key and self.headers.get("Authorization") != f"Bearer {owner.api_key}":
                self._send(401, _error("Incorrect API key provided.", "invalid_api_key"))
                return
            if self.path not in ("/v1/chat/completions", "/v1/responses"):
                self._send(404, _error(f"Unknown path {self.path}", "not_found"))
                return
            step = owner._next(self.path, body, {k.lower(): v for k, v in self.headers.items()})
            if isinstance(step, Delay):
                time.sleep(step.seconds)
                step = step.then
            elif isinstance(step, Hold):
                if step.after_words and body.get("stream") and isinstance(step.then, LlmResponse):
                    events, cut = self._events(step.then, body, step.after_words)
                    self._stream(events[:cut], done=False)
                    if self._held():
                        self._stream(events[cut:], head=False, done=self._chat)
                    return
                if not self._held():
                    return
                step = step.then
            model = body.get("model", "scripted")
            responses = self.path == "/v1/responses"
            if isinstance(step, Unfinished) and responses and body.get("stream"):
                self._stream(_unfinished_events(step, model), done=False)
            elif isinstance(step, Unfinished) and responses:
                self._send(200, _unfinished_body(step, model))
            elif isinstance(step, Unfinished):
                self._send(500, _error(step.message, step.code))
            elif isinstance(step, Fail):
                self._send(step.status, _error(step.message, "scripted"))
            elif isinstance(step, Raw):
                kind = "text/event-stream" if body.get("stream") else "application/json"
                self._send_bytes(200, step.body, kind)
            elif body.get("stream"):
                self._stream(self._events(step, body, 0)[0], done=self._chat)
            elif self._chat:
                self._send(200, _chat_body(step, model))
            else:
                self._send(200, _responses_body(step, model))

        @property
        def _chat(self) -> bool:
            return self.path == "/v1/chat/completions"

        def _events(
            self, response: LlmResponse, body: dict[str, Any], words: int
        ) -> tuple[list[dict[str, Any]], int]:
            """The stream of this API for ``response``, and where its first ``words`` end."""
            model = body.get("model", "scripted")
            if self._chat:
                return _chat_chunks(response, model), 1 + words
            events = _responses_events(response, model)
            deltas = [i for i, e in enumerate(events) if e["type"] == "response.output_text.delta"]
            cut = deltas[words - 1] + 1 if 0 < words <= len(deltas) else len(events) - 1
            return events, cut

        def _held(self) -> bool:
            """Wait for the release; False when the server stops first (nothing more sent)."""
            while not owner._released.wait(0.05):
                if owner._stopped.is_set():
                    return False  # dropped: the server stops without answering
            return True

        def _stream(
            self, chunks: list[dict[str, Any]], *, head: bool = True, done: bool = True
        ) -> None:
            if head:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
            for chunk in chunks:
                # A Responses event is named on its own line too, as the API sends it.
                named = f"event: {chunk['type']}\n" if "sequence_number" in chunk else ""
                self.wfile.write(f"{named}data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            if done:
                self.wfile.write(b"data: [DONE]\n\n")
            self.close_connection = True

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            self._send_bytes(status, json.dumps(payload).encode(), "application/json")

        def _send_bytes(self, status: int, data: bytes, content_type: str) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                pass

    return Handler


def _error(message: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


def _chat_body(response: LlmResponse, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": response.text}
    if response.refusal is not None:
        message["refusal"] = response.refusal
    if response.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in response.tool_calls
        ]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": response.model_id or model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": _finish(response),
            }
        ],
        "usage": {
            "prompt_tokens": response.usage.prompt_tokens,
            "completion_tokens": response.usage.completion_tokens,
            "total_tokens": response.usage.total_tokens,
        },
    }


def _chat_chunks(response: LlmResponse, model: str) -> list[dict[str, Any]]:
    """The chunks a streaming Chat Completions server sends: words, then call fragments."""
    base = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": response.model_id or model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    for piece in re.findall(r"\S+\s*|\s+", response.text or ""):
        chunks.append(chunk({"content": piece}))
    for piece in re.findall(r"\S+\s*|\s+", response.refusal or ""):
        chunks.append(chunk({"refusal": piece}))
    for index, c in enumerate(response.tool_calls):
        half = len(c.arguments) // 2
        head = {"index": index, "id": c.id, "type": "function"}
        chunks.append(
            chunk(
                {
                    "tool_calls": [
                        {**head, "function": {"name": c.name, "arguments": c.arguments[:half]}}
                    ]
                }
            )
        )
        chunks.append(
            chunk({"tool_calls": [{"index": index, "function": {"arguments": c.arguments[half:]}}]})
        )
    chunks.append(chunk({}, _finish(response)))
    chunks.append(
        {
            **base,
            "choices": [],
            "usage": {
                "prompt_tokens": response.usage.prompt_tokens,
                "completion_tokens": response.usage.completion_tokens,
                "total_tokens": response.usage.total_tokens,
            },
        }
    )
    return chunks


def _responses_body(response: LlmResponse, model: str) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if response.text or response.refusal:
        content: list[dict[str, Any]] = []
        if response.text:
            content.append({"type": "output_text", "text": response.text, "annotations": []})
        if response.refusal:
            content.append({"type": "refusal", "refusal": response.refusal})
        output.append(
            {
                "type": "message",
                "id": f"msg_{uuid.uuid4().hex[:12]}",
                "status": "completed",
                "role": "assistant",
                "content": content,
            }
        )
    for c in response.tool_calls:
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{uuid.uuid4().hex[:12]}",
                "call_id": c.id,
                "name": c.name,
                "arguments": c.arguments,
                "status": "completed",
            }
        )
    cut = _finish(response) in ("length", "content_filter")
    reason = "content_filter" if _finish(response) == "content_filter" else "max_output_tokens"
    return {
        "id": f"resp_{uuid.uuid4().hex[:12]}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": reason} if cut else None,
        "model": response.model_id or model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": response.usage.prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": response.usage.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": response.usage.total_tokens,
        },
    }


def _responses_events(response: LlmResponse, model: str) -> list[dict[str, Any]]:
    """The events a streaming Responses API server sends for ``response``.

    ``response.created`` and ``response.in_progress``; per output item
    ``response.output_item.added``, its text (or refusal) word by word within a content part,
    or a call's arguments in two pieces, and ``response.output_item.done``; then
    ``response.completed``, or ``response.incomplete`` for an answer that was cut.
    """
    whole = _responses_body(response, model)
    started = {**whole, "status": "in_progress", "incomplete_details": None, "output": []}
    started["usage"] = None
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
    ]
    for index, item in enumerate(whole["output"]):
        at = {"output_index": index}
        if item["type"] == "function_call":
            events.append(
                {
                    "type": "response.output_item.added",
                    **at,
                    "item": {**item, "arguments": "", "status": "in_progress"},
                }
            )
            arguments = item["arguments"]
            half = len(arguments) // 2
            for piece in (arguments[:half], arguments[half:]):
                events.append(
                    {
                        "type": "response.function_call_arguments.delta",
                        **at,
                        "item_id": item["id"],
                        "delta": piece,
                    }
                )
            events.append(
                {
                    "type": "response.function_call_arguments.done",
                    **at,
                    "item_id": item["id"],
                    "arguments": arguments,
                }
            )
        else:
            events.append(
                {
                    "type": "response.output_item.added",
                    **at,
                    "item": {**item, "content": [], "status": "in_progress"},
                }
            )
            for part_index, part in enumerate(item["content"]):
                events.extend(_part_events(part, {**at, "item_id": item["id"]}, part_index))
        events.append({"type": "response.output_item.done", **at, "item": item})
    ending = "response.incomplete" if whole["status"] == "incomplete" else "response.completed"
    events.append({"type": ending, "response": whole})
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


def _part_events(part: dict[str, Any], at: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """A message's content part as it streams: added, its words, its whole, done."""
    text = part["type"] == "output_text"
    key, kind = ("text", "output_text") if text else ("refusal", "refusal")
    where = {**at, "content_index": index}
    extra: dict[str, Any] = {"logprobs": []} if text else {}
    events: list[dict[str, Any]] = [
        {"type": "response.content_part.added", **where, "part": {**part, key: ""}}
    ]
    for piece in re.findall(r"\S+\s*|\s+", part[key]):
        events.append({"type": f"response.{kind}.delta", **where, "delta": piece, **extra})
    events.append({"type": f"response.{kind}.done", **where, key: part[key], **extra})
    events.append({"type": "response.content_part.done", **where, "part": part})
    return events


def _unfinished_events(step: Unfinished, model: str) -> list[dict[str, Any]]:
    """A streamed answer that holds none: ``failed`` ends so; other statuses never end."""
    body = _unfinished_body(step, model)
    if step.status != "failed":
        return [{"type": "response.created", "response": body, "sequence_number": 0}]
    started = {**body, "status": "in_progress", "error": None}
    events = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
        {"type": "response.failed", "response": body},
    ]
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


def _finish(response: LlmResponse) -> str:
    """The Chat Completions ``finish_reason``: the scripted one, else what the answer holds."""
    return response.finish_reason or ("tool_calls" if response.tool_calls else "stop")


def _unfinished_body(step: Unfinished, model: str) -> dict[str, Any]:
    error = {"code": step.code, "message": step.message} if step.status == "failed" else None
    return {
        "id": f"resp_{uuid.uuid4().hex[:12]}",
        "object": "response",
        "created_at": int(time.time()),
        "status": step.status,
        "error": error,
        "incomplete_details": None,
        "model": model,
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": None,
    }


if __name__ == "__main__":  # python -m aptix.testing.server
    from aptix.testing.server_cli import main

    main()
