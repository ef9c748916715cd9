"""An ``execute_tool`` span says how its call ended in attributes a backend filters on: a call
stopped at its time limit has its own ``error.type``, not a failed call's."""

from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import aptix
from aptix import AgentToolRegistry
from aptix.telemetry import OtelTracing
from aptix.testing import RecordingLogger
from aptix.tools import AgentToolCall, AgentToolExecutionContext
from aptix.tools.traced import TracedToolExecutor


@aptix.tool(usage="Call to wait.")
async def span_sleeper(seconds: float) -> str:
    """Wait.

    Args:
        seconds: How long.

    """
    await asyncio.sleep(seconds)
    return "slept"


@aptix.tool(usage="Call to fail.")
async def span_crasher(text: str) -> str:
    """Fail.

    Args:
        text: The message.

    """
    raise RuntimeError(text)


@aptix.tool(usage="Call to answer.")
async def span_answerer(text: str) -> str:
    """Answer.

    Args:
        text: The answer.

    """
    return text


async def test_a_timed_out_call_has_its_own_error_type() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    logger = RecordingLogger()
    registry = AgentToolRegistry(logger)
    for tool in (span_sleeper, span_crasher, span_answerer):
        registry.register(tool)
    executor = TracedToolExecutor(OtelTracing(provider), registry, logger, timeout_seconds=0.2)
    context = AgentToolExecutionContext(session_id="s-1", conversation_id="t-1")
    for name, arguments in (
        ("span_sleeper", '{"seconds": 5}'),
        ("span_crasher", '{"text": "boom"}'),
        ("span_answerer", '{"text": "ok"}'),
    ):
        done = await executor.execute(AgentToolCall("c", name, arguments), context)
        assert done.outcome == {"span_sleeper": "timed_out", "span_crasher": "failed"}.get(
            name, "succeeded"
        )
    spans = {s.name: dict(s.attributes or {}) for s in exporter.get_finished_spans()}
    statuses = {s.name: s.status.status_code for s in exporter.get_finished_spans()}
    slept: dict[str, Any] = spans["execute_tool span_sleeper"]
    assert slept["error.type"] == "aptix.tool_timed_out"
    assert slept["aptix.tool.outcome"] == "timed_out"
    crashed = spans["execute_tool span_crasher"]
    assert crashed["error.type"] == "aptix.tool_error"
    assert crashed["aptix.tool.outcome"] == "failed"
    answered = spans["execute_tool span_answerer"]
    assert "error.type" not in answered
    assert answered["aptix.tool.outcome"] == "succeeded"
    assert statuses["execute_tool span_sleeper"] == StatusCode.ERROR
    assert statuses["execute_tool span_answerer"] == StatusCode.UNSET
