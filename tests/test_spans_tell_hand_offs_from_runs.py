"""A call handed off (to the client, or held for the user's approval) has not run, and its span
says so; the approved run is the call's one execution, and a denial is on the resumed turn."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from aptix import AgentTool, InvokeResult
from aptix.api import create_app
from aptix.reasoner import AgentReasoner, ToolResultInput
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.telemetry import DENIAL_EVENT, OtelTracing
from aptix.testing import ScriptedModel, call, reply
from aptix.tools import AgentToolExecutionContext, function_schema
from aptix.tools.args import ToolArgs

RUNS: list[str] = []


class _Args(ToolArgs):
    pass


class Destroy(AgentTool):
    """Like an MCP tool under ``approval: always``: asks first, acts once approved."""

    TOOL_NAME = "destroy"
    TOOL_USAGE_METADATA: ClassVar[str] = "Destroys things after approval."
    is_fully_executed_on_server: ClassVar[bool] = False

    def __init__(self, logger: Any) -> None:
        self.logger = logger

    @classmethod
    def schema(cls) -> dict[str, Any]:
        return function_schema(cls.TOOL_NAME, "Destroys.", _Args)

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        return InvokeResult.create('{"kind": "approval_request", "prompt": "Destroy?"}')

    async def run_approved(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        RUNS.append(self.TOOL_NAME)
        return InvokeResult.create('{"destroyed": true}')


@dataclass
class Traced:
    runtime: Runtime
    exporter: InMemorySpanExporter

    def spans(self, name: str) -> list[ReadableSpan]:
        found = [s for s in self.exporter.get_finished_spans() if s.name == name]
        return sorted(found, key=lambda s: s.start_time or 0)


@pytest.fixture
async def traced(settings: AptixSettings) -> AsyncIterator[Traced]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    RUNS.clear()
    async with open_runtime(settings, tracing=OtelTracing(provider)) as runtime:
        yield Traced(runtime, exporter)


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def _session(runtime: Runtime) -> str:
    created = await runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    return created.result.id


def _gated(
    runtime: Runtime, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> AgentReasoner:
    """A reasoner offering the approval-gated tool (outside any mode, so no guard)."""
    runtime.registry.register(Destroy)
    monkeypatch.setattr(runtime.executor, "_guard", None)
    reasoner = runtime.reasoner(model)
    reasoner._offered = lambda _w, mode_tools, _o: [*mode_tools, "destroy"]
    return reasoner


async def test_a_call_held_for_approval_is_pending_then_runs_once_when_approved(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedModel.of(reply(None, call("destroy", {}, id="d1")), reply("Destroyed."))
    reasoner = _gated(traced.runtime, model, monkeypatch)
    session_id = await _session(traced.runtime)
    asked = await reasoner.execute(
        session_id=session_id, org="acme", user="ann", instruction="destroy it"
    )
    assert asked.kind == "tool-only"
    assert RUNS == []
    approved = await reasoner.execute(
        session_id=session_id,
        org="acme",
        user="ann",
        tool_results=[ToolResultInput("d1", '{"approved": true}')],
    )
    assert approved.kind == "ok"
    assert RUNS == ["destroy"]

    question, run = traced.spans("execute_tool destroy")
    assert _attrs(question)["gen_ai.tool.call.id"] == _attrs(run)["gen_ai.tool.call.id"] == "d1"
    # The first span only asked the question: nothing ran, so nothing succeeded.
    assert _attrs(question)["aptix.tool.outcome"] == "pending"
    assert _attrs(question)["aptix.tool.state"] == "awaiting_approval"
    assert _attrs(question)["aptix.tool.handed_off"] is True
    assert "aptix.tool.approved" not in _attrs(question)
    assert question.status.status_code == StatusCode.UNSET
    # The approved run is the call's one execution, with its real outcome.
    assert _attrs(run)["aptix.tool.outcome"] == "succeeded"
    assert _attrs(run)["aptix.tool.approved"] is True
    assert "aptix.tool.handed_off" not in _attrs(run)
    executions = [
        s
        for s in traced.spans("execute_tool destroy")
        if _attrs(s)["aptix.tool.outcome"] != "pending"
    ]
    assert executions == [run]


async def test_a_denied_call_is_an_event_on_the_resumed_turn(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedModel.of(reply(None, call("destroy", {}, id="d2")), reply("Left it."))
    reasoner = _gated(traced.runtime, model, monkeypatch)
    session_id = await _session(traced.runtime)
    await reasoner.execute(session_id=session_id, org="acme", user="ann", instruction="destroy")
    denied = await reasoner.execute(
        session_id=session_id,
        org="acme",
        user="ann",
        tool_results=[ToolResultInput("d2", '{"approved": false}')],
    )
    assert denied.kind == "ok"
    assert [c["outcome"] for c in denied.tool_calls] == ["denied"]
    assert RUNS == []
    [question] = traced.spans("execute_tool destroy")  # no span for a run that never was
    assert _attrs(question)["aptix.tool.outcome"] == "pending"
    asked, resumed = traced.spans("invoke_agent aptix")
    assert not [e for e in asked.events if e.name == DENIAL_EVENT]
    [denial] = [e for e in resumed.events if e.name == DENIAL_EVENT]
    assert dict(denial.attributes or {}) == {
        "gen_ai.tool.name": "destroy",
        "gen_ai.tool.call.id": "d2",
        "aptix.tool.outcome": "denied",
    }


async def test_a_call_handed_to_the_client_is_pending_not_succeeded(traced: Traced) -> None:
    model = ScriptedModel.of(
        reply(None, call("request_user_approval", {"prompt": "Send?"}, id="u1")), reply("Sent.")
    )
    reasoner = traced.runtime.reasoner(model)
    session_id = await _session(traced.runtime)
    handed = await reasoner.execute(
        session_id=session_id, org="acme", user="ann", instruction="send it"
    )
    [pending] = handed.tool_calls
    assert pending["outcome"] == "pending"
    [span] = traced.spans("execute_tool request_user_approval")
    assert _attrs(span)["aptix.tool.outcome"] == pending["outcome"]
    assert _attrs(span)["aptix.tool.state"] == "awaiting_client"
    assert span.status.status_code == StatusCode.UNSET


async def test_a_client_declared_tool_over_the_openai_endpoint_is_pending(
    tmp_path: Path,
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False)
    model = ScriptedModel.of(reply(None, call("my_client_fn", {"x": 1}, id="k1")))
    tool = {
        "type": "function",
        "function": {
            "name": "my_client_fn",
            "description": "Runs on the client.",
            "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}},
        },
    }
    async with open_runtime(settings, tracing=OtelTracing(provider)) as runtime:
        app = create_app(runtime=runtime, model=model)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            answer = await client.post(
                "/v1/chat/completions",
                json={
                    "model": "aptix-general",
                    "messages": [{"role": "user", "content": "call it"}],
                    "tools": [tool],
                },
            )
    assert answer.status_code == 200, answer.text
    [choice] = answer.json()["choices"]
    assert choice["finish_reason"] == "tool_calls"
    [span] = [s for s in exporter.get_finished_spans() if s.name == "execute_tool my_client_fn"]
    assert _attrs(span)["aptix.tool.outcome"] == "pending"
    assert _attrs(span)["aptix.tool.state"] == "awaiting_client"
