"""Text from outside (a model endpoint's error body, a tool name the model made up) reaches
the spans bounded and on one line, and never as a span's name."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.telemetry import REFUSAL_EVENT, OtelTracing, open_tracing
from aptix.testing import ScriptedModel, call, reply
from aptix.testing.server import Fail, ScriptedOpenAIServer

#: What an endpoint (or a model) may send: far too long, with a terminal escape in it.
HUGE = "E" * 300_000 + "\x1b[31mRED"


@dataclass
class Traced:
    runtime: Runtime
    exporter: InMemorySpanExporter


@pytest.fixture
def endpoint() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as server:
        yield server


@pytest.fixture
async def traced(settings: AptixSettings, endpoint: ScriptedOpenAIServer) -> AsyncIterator[Traced]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()  # no attribute limits: what is bounded, Aptix bounded
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    settings = settings.model_copy(
        update={
            "llm_base_url": endpoint.base_url,
            "llm_model": "scripted",
            "llm_max_retries": 0,
        }
    )
    async with open_runtime(settings, tracing=OtelTracing(provider)) as runtime:
        yield Traced(runtime, exporter)


def _texts(span: ReadableSpan) -> list[str]:
    """Every text the span exports: its name, status, attributes and events."""
    texts = [span.name, span.status.description or ""]
    values: list[Any] = list((span.attributes or {}).values())
    for event in span.events:
        texts.append(event.name)
        values.extend((event.attributes or {}).values())
    for value in values:
        texts.extend(value if isinstance(value, tuple) else [value])
    return [str(t) for t in texts]


async def _run(traced: Traced, model: ScriptedModel | None = None) -> Any:
    sessions = traced.runtime.services.sessions
    created = await sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    return await traced.runtime.reasoner(model).execute(
        session_id=created.result.id, org="acme", user="ann", instruction="go"
    )


async def test_an_endpoints_long_error_body_is_bounded_on_the_chat_span(
    traced: Traced, endpoint: ScriptedOpenAIServer
) -> None:
    endpoint.add(Fail(500, HUGE))
    result = await _run(traced)  # the real OpenAI client, against a real HTTP endpoint
    assert result.kind == "error"
    spans = traced.exporter.get_finished_spans()
    [chat] = [s for s in spans if s.name == "chat scripted"]
    assert chat.status.status_code == StatusCode.ERROR
    assert (chat.attributes or {})["error.type"] == "LlmError"
    [exception] = [e for e in chat.events if e.name == "exception"]
    assert set(exception.attributes or {}) == {"exception.type", "exception.message"}
    for span in spans:
        for text in _texts(span):
            assert len(text) <= 500, (span.name, len(text))
            assert "\x1b" not in text, span.name


async def test_a_tool_name_the_model_made_up_is_a_bounded_refusal_not_a_span(
    traced: Traced,
) -> None:
    made_up = "no_such_tool_\x1b[2J" + "x" * 5000
    model = ScriptedModel.of(reply(None, call(made_up, {}, id="u1")), reply("Done."))
    result = await _run(traced, model)
    assert result.kind == "ok"
    [failed] = result.tool_calls
    assert failed["errorMessage"].startswith("Unknown tool")  # the model still learns why
    spans = traced.exporter.get_finished_spans()
    names = sorted(s.name for s in spans)
    assert names == ["chat ScriptedModel", "chat ScriptedModel", "invoke_agent aptix"]
    [turn] = [s for s in spans if s.name == "invoke_agent aptix"]
    [refusal] = [e for e in turn.events if e.name == REFUSAL_EVENT]
    name = str((refusal.attributes or {})["gen_ai.tool.name"])
    assert name.startswith("no_such_tool_\\x1b[2Jxxx")  # escaped, and cut
    assert "Unknown tool" in str((refusal.attributes or {})["reason"])
    for span in spans:
        for text in _texts(span):
            assert len(text) <= 500, (span.name, len(text))
            assert "\x1b" not in text, span.name


def test_aptix_s_provider_cuts_long_attribute_values_unless_told_otherwise(
    settings: AptixSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    monkeypatch.delenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", raising=False)
    on = settings.model_copy(update={"otel": True})
    for variable, expected in ((None, 4096), ("100000", 100_000)):
        if variable is not None:
            monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", variable)
        tracing = open_tracing(on)
        exporter = InMemorySpanExporter()
        assert isinstance(tracing, OtelTracing)
        assert isinstance(tracing.provider, TracerProvider)
        tracing.provider.add_span_processor(SimpleSpanProcessor(exporter))
        with tracing.tracer.start_as_current_span("s") as span:
            span.set_attribute("long", "x" * 200_000)
        [done] = exporter.get_finished_spans()
        assert len(str((done.attributes or {})["long"])) == expected
        tracing.shutdown()
