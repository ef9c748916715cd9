"""The HTTP server span FastAPI makes carries the request's text (its path, query and Host)
as Aptix's own spans carry text from outside: cut to 500 characters, controls escaped."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from aptix.api import create_app
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.telemetry import OtelTracing


def _plain(text: str) -> bool:
    return not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in text)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()  # no attribute limits: what is bounded, Aptix bounded
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False)
    async with open_runtime(settings, tracing=OtelTracing(provider)) as runtime:
        transport = httpx.ASGITransport(app=create_app(runtime=runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield client, exporter


def _server_span(exporter: InMemorySpanExporter) -> dict[str, Any]:
    spans: list[ReadableSpan] = [
        s for s in exporter.get_finished_spans() if s.kind == SpanKind.SERVER
    ]
    [span] = spans
    return dict(span.attributes or {})


async def test_control_characters_in_the_path_are_escaped(
    served: tuple[httpx.AsyncClient, InMemorySpanExporter],
) -> None:
    client, exporter = served
    answer = await client.get("/v1/sessions/abc%1b%5b2J%0aFORGED%0d%07")
    assert answer.status_code == 404
    attributes = _server_span(exporter)
    assert attributes["url.path"] == "/v1/sessions/abc\\x1b[2J\\nFORGED\\r\\x07"
    assert attributes["http.route"] == "/v1/sessions/{session_id}"  # FastAPI's own, unchanged


async def test_a_long_path_and_query_are_cut_to_500_characters(
    served: tuple[httpx.AsyncClient, InMemorySpanExporter],
) -> None:
    client, exporter = served
    answer = await client.get("/v1/sessions/" + "a" * 10_000, params={"q": "b" * 10_000})
    assert answer.status_code == 404
    attributes = _server_span(exporter)
    for key in ("url.path", "url.query"):
        value = str(attributes[key])
        assert len(value) == 500, key
        assert value.endswith("…"), key
        assert _plain(value), key


async def test_every_text_attribute_of_the_server_span_is_plain_and_bounded(
    served: tuple[httpx.AsyncClient, InMemorySpanExporter],
) -> None:
    client, exporter = served
    answer = await client.get("/healthz/%1b" + "z" * 1_000, params={"k": "\x1b\n" * 800})
    assert answer.status_code == 404
    for key, value in _server_span(exporter).items():
        if isinstance(value, str):
            assert len(value) <= 500, key
            assert _plain(value), key
