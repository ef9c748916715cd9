"""Every span says how its operation ended: a cancelled turn, a failed model call, a call the
token budget refused before sending anything, and what the demo model really is."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from aptix.api import create_app
from aptix.errors import LlmError
from aptix.llm.types import LlmRequest, LlmResponse, Usage
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.telemetry import OtelTracing
from aptix.testing import FunctionModel, ScriptedModel, call, reply


@dataclass
class Traced:
    runtime: Runtime
    exporter: InMemorySpanExporter

    def spans(self, name: str) -> list[ReadableSpan]:
        found = [s for s in self.exporter.get_finished_spans() if s.name == name]
        return sorted(found, key=lambda s: s.start_time or 0)


def _traced(settings: AptixSettings) -> tuple[OtelTracing, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OtelTracing(provider), exporter


@pytest.fixture
async def traced(settings: AptixSettings) -> AsyncIterator[Traced]:
    tracing, exporter = _traced(settings)
    async with open_runtime(settings, tracing=tracing) as runtime:
        yield Traced(runtime, exporter)


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_turn_cancelled_through_its_route_says_so_on_its_spans(traced: Traced) -> None:
    called = asyncio.Event()

    async def never_answers(request: LlmRequest) -> LlmResponse:
        called.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    app = create_app(runtime=traced.runtime, model=FunctionModel(never_answers))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        sid = (await client.post("/v1/sessions", json={})).json()["sessionId"]
        running = asyncio.create_task(
            client.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "wait"})
        )
        await asyncio.wait_for(called.wait(), 30)
        [turn] = await traced.runtime.turns.list_turns(sid, "local")
        cancelled = await client.post(f"/v1/sessions/{sid}/turns/{turn.id}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        answer = await asyncio.wait_for(running, 30)
    assert answer.json()["kind"] == "cancelled"
    [agent] = traced.spans("invoke_agent aptix")
    assert _attrs(agent)["aptix.turn.kind"] == "cancelled"
    assert _attrs(agent)["error.type"] == "cancelled"
    assert _attrs(agent)["gen_ai.usage.input_tokens"] == 0
    assert agent.status.status_code == StatusCode.ERROR
    [chat] = traced.spans("chat FunctionModel")
    assert _attrs(chat)["error.type"] == "cancelled"


async def test_a_failed_model_call_has_an_error_type(traced: Traced) -> None:
    created = await traced.runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    model = ScriptedModel.of(LlmError("The model endpoint answered 500."))
    result = await traced.runtime.reasoner(model).execute(
        session_id=created.result.id, org="acme", user="ann", instruction="hi"
    )
    assert result.kind == "error"
    [chat] = traced.spans("chat ScriptedModel")
    assert _attrs(chat)["error.type"] == "LlmError"
    assert chat.status.description == "LlmError: The model endpoint answered 500."


async def test_a_call_the_token_budget_refused_is_marked_as_never_sent(
    settings: AptixSettings,
) -> None:
    tracing, exporter = _traced(settings)
    model = ScriptedModel.of(
        reply(None, call("agent_calculator", {"expression": "6*7"}), usage=Usage(180, 20))
    )
    limited = settings.model_copy(update={"token_budget": "100/minute"})
    async with open_runtime(limited, tracing=tracing) as runtime:
        app = create_app(runtime=runtime, model=model)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            answer = await client.post("/v1/agent/execute", json={"instruction": "6*7"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["kind"] == "error"
    assert "Token budget reached" in answer.json()["error"]
    model.assert_complete()  # the second call never reached the model
    chats = sorted(
        (s for s in exporter.get_finished_spans() if s.name.startswith("chat ")),
        key=lambda s: s.start_time or 0,
    )
    assert [_attrs(c).get("error.type") for c in chats] == [None, "TokenBudgetError"]


async def test_the_demo_models_spans_name_the_demo_model_and_no_remote_provider(
    settings: AptixSettings,
) -> None:
    tracing, exporter = _traced(settings)
    demo = settings.model_copy(update={"llm_model": "demo"})
    async with open_runtime(demo, tracing=tracing) as runtime:
        created = await runtime.services.sessions.create_session(org="acme", user="ann")
        assert created.result is not None
        await runtime.reasoner().execute(
            session_id=created.result.id, org="acme", user="ann", instruction="what is 2+2"
        )
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    assert [c.name for c in chats] == ["chat demo", "chat demo"]
    for chat in chats:
        attributes = _attrs(chat)
        assert attributes["gen_ai.request.model"] == "demo"
        assert attributes["gen_ai.provider.name"] == "aptix.demo"
        assert "server.address" not in attributes
