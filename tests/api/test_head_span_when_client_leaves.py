"""``HEAD`` of a console file from a client that closes after the headers (``curl -I``): the
request's server span is not an error; the answer was complete when its headers went out."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from starlette.types import Message

from aptix.api import create_app
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.telemetry import OtelTracing


async def _head_then_leave(
    app: object, path: str, extensions: dict[str, object] | None = None
) -> list[Message]:
    """HEAD ``path`` as uvicorn serves it (ASGI 2.3), the client leaving once the headers came."""
    headers_out = asyncio.Event()
    sent: list[Message] = []
    requested = False

    async def receive() -> Message:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await headers_out.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)
        if message["type"] == "http.response.start":
            headers_out.set()
            await asyncio.sleep(0.05)  # a write that takes a moment: the client is gone by then

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "HEAD",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1")],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8000),
        "state": {},
        "extensions": extensions or {},
    }
    await app(scope, receive, send)  # type: ignore[operator]
    return sent


@pytest.mark.parametrize("path", ["/console/vendor/markdown-it.js", "/console/index.html"])
async def test_head_of_a_console_file_is_not_a_failed_request_when_the_client_leaves(
    tmp_path: Path, path: str
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False)
    async with open_runtime(settings, tracing=OtelTracing(provider)) as runtime:
        sent = await _head_then_leave(create_app(runtime=runtime), path)
    [span] = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.SERVER]
    attributes = dict(span.attributes or {})
    assert attributes["http.request.method"] == "HEAD"
    assert attributes["http.response.status_code"] == 200
    assert "error.type" not in attributes, attributes["error.type"]
    assert span.status.status_code != StatusCode.ERROR
    # The headers a GET gets, then the end of a bodiless answer; nothing after it.
    start, end = sent
    assert start["type"] == "http.response.start"
    assert start["status"] == 200
    length = dict(start["headers"])[b"content-length"]
    assert int(length) > 0  # a GET's length
    assert end == {"type": "http.response.body", "body": b""}


async def test_head_never_hands_a_file_to_a_server_that_sends_files_itself(tmp_path: Path) -> None:
    """A server offering ``http.response.pathsend`` (Granian) would send the file's bytes."""
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False)
    async with open_runtime(settings) as runtime:
        app = create_app(runtime=runtime)
        sent = await _head_then_leave(app, "/console/index.html", {"http.response.pathsend": {}})
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert sent[1] == {"type": "http.response.body", "body": b""}
