"""A call the active workflow refuses did not run: it is a refusal event, never an
``execute_tool`` span (docs/deployment.md#traces, "To count executions")."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from aptix import AgentToolRegistry
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.telemetry import REFUSAL_EVENT, OtelTracing
from aptix.testing import RecordingLogger, ScriptedModel, call, reply
from aptix.tools import AgentToolCall, AgentToolExecutionContext
from aptix.tools.traced import TracedToolExecutor
from tests.tools.test_contract_edges import BrokenConstructorTool


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracing(exporter: InMemorySpanExporter) -> OtelTracing:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OtelTracing(provider)


@pytest.fixture
async def runtime(settings: AptixSettings, tracing: OtelTracing) -> AsyncIterator[Runtime]:
    async with open_runtime(settings, tracing=tracing) as opened:
        yield opened


async def _turn_in_workflow(runtime: Runtime, *calls: Any) -> None:
    sessions = runtime.services.sessions
    created = await sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    await sessions.set_active_workflow(created.result.id, "guided_calculation", "acme", "ann")
    model = ScriptedModel.of(reply(None, *calls), reply("ok"))
    await runtime.reasoner(model).execute(
        session_id=created.result.id, org="acme", user="ann", instruction="go"
    )
    model.assert_complete()


async def test_a_call_the_workflow_refuses_is_an_event_on_the_turn_not_a_span(
    runtime: Runtime, exporter: InMemorySpanExporter
) -> None:
    await _turn_in_workflow(
        runtime,
        call("agent_hello_world", {"name": "Ann"}, id="h1"),  # not permitted in the workflow
        call("agent_calculator", {"expression": "6*7"}, id="c1"),  # permitted: it runs
    )
    spans = exporter.get_finished_spans()
    tools = [s for s in spans if s.name.startswith("execute_tool ")]
    assert [s.name for s in tools] == ["execute_tool agent_calculator"]
    assert (tools[0].attributes or {})["aptix.tool.outcome"] == "succeeded"
    [turn] = [s for s in spans if s.name == "invoke_agent aptix"]
    [refusal] = [e for e in turn.events if e.name == REFUSAL_EVENT]
    attributes = dict(refusal.attributes or {})
    assert attributes["gen_ai.tool.call.id"] == "h1"
    assert attributes["gen_ai.tool.name"] == "agent_hello_world"
    assert attributes["reason"]  # the guard's words
    # No span anywhere says the refused call ran and failed.
    assert not any(e.name == REFUSAL_EVENT for s in tools for e in s.events)


async def test_a_tool_that_cannot_be_built_is_still_a_failed_execute_tool_span(
    tracing: OtelTracing, exporter: InMemorySpanExporter, context: AgentToolExecutionContext
) -> None:
    # It was let through and failed on the server's side: a failed execution, as before.
    logger = RecordingLogger()
    registry = AgentToolRegistry(logger)
    registry.register(BrokenConstructorTool)
    executor = TracedToolExecutor(tracing, registry, logger)
    done = await executor.execute(AgentToolCall("b1", "broken_constructor", "{}"), context)
    assert done.outcome == "failed"
    [span] = exporter.get_finished_spans()
    assert span.name == "execute_tool broken_constructor"
    assert (span.attributes or {})["aptix.tool.outcome"] == "failed"
    assert (span.attributes or {})["error.type"] == "aptix.tool_error"
    assert span.status.status_code == StatusCode.ERROR
