"""Every ending of a turn leaves the same attributes on its ``invoke_agent`` span: its kind, its
mode and active workflow as the turn ended, and its tokens, also when an exception ended it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from sqlalchemy import exc as sa

from aptix.api import create_app
from aptix.llm.types import Usage
from aptix.reasoner import endings
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.telemetry import OtelTracing
from aptix.testing import ScriptedModel, call, reply

OUTAGE = sa.OperationalError("UPDATE turns", None, ConnectionRefusedError())


@dataclass
class Traced:
    runtime: Runtime
    exporter: InMemorySpanExporter

    def turn(self) -> dict[str, Any]:
        [span] = self.spans("invoke_agent aptix")
        return dict(span.attributes or {})

    def spans(self, name: str) -> list[ReadableSpan]:
        found = [s for s in self.exporter.get_finished_spans() if s.name == name]
        return sorted(found, key=lambda s: s.start_time or 0)


@pytest.fixture
async def traced(settings: AptixSettings) -> AsyncIterator[Traced]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    async with open_runtime(settings, tracing=OtelTracing(provider)) as runtime:
        yield Traced(runtime, exporter)


@pytest.fixture(autouse=True)
def _quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(endings, "SAVE_RETRY_SECONDS", (0.0, 0.0, 0.0))


def _failing_after_the_call_ran(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch, error: Exception, times: int
) -> None:
    """The store raises ``error`` for its next ``times`` writes once a call has succeeded."""
    store = runtime.turns
    save, settle = store.save, store.settle
    left = [times]

    def refuse(record: Any) -> None:
        ran = any(e["state"] == "succeeded" for e in record.tool_calls)
        if ran and left[0] > 0:
            left[0] -= 1
            raise error

    async def failing_save(record: Any) -> Any:
        refuse(record)
        return await save(record)

    async def failing_settle(record: Any) -> Any:
        refuse(record)
        return await settle(record)

    monkeypatch.setattr(store, "save", failing_save)
    monkeypatch.setattr(store, "settle", failing_settle)


async def _execute(runtime: Runtime, model: ScriptedModel) -> tuple[str, httpx.Response]:
    app = create_app(runtime=runtime, model=model)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        sid = (await client.post("/v1/sessions", json={})).json()["sessionId"]
        told = await client.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "go"})
    return sid, told


def _calculator_then_answer() -> ScriptedModel:
    return ScriptedModel.of(
        reply(None, call("agent_calculator", {"expression": "6*7"}, id="c1"), usage=Usage(10, 5)),
        reply("42.", usage=Usage(20, 2)),
    )


async def test_a_turn_a_database_outage_ended_says_so_as_its_record_does(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The checkpoint after the call fails, then the ending's first two attempts: the third lands.
    _failing_after_the_call_ran(traced.runtime, monkeypatch, OUTAGE, times=3)
    sid, told = await _execute(traced.runtime, _calculator_then_answer())
    assert told.status_code == 200  # the call ran: answered as the failed turn, not "retry"
    assert told.json()["kind"] == "error"
    [stored] = await traced.runtime.turns.list_turns(sid, "local")
    assert stored.status == "error"
    turn = traced.turn()
    assert turn["aptix.turn.kind"] == "error"
    assert turn["error.type"] == "database_unavailable"  # the stored code, not the driver's class
    assert (turn["gen_ai.usage.input_tokens"], turn["gen_ai.usage.output_tokens"]) == (10, 5)
    assert turn["aptix.mode"] == "general"
    [span] = traced.spans("invoke_agent aptix")
    assert span.status.status_code == StatusCode.ERROR
    [exception] = [e for e in span.events if e.name == "exception"]
    assert (exception.attributes or {})["exception.type"] == "OperationalError"


async def test_a_turn_an_unexpected_error_ended_reads_internal_error(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    _failing_after_the_call_ran(traced.runtime, monkeypatch, KeyError("bug"), times=1)
    _, told = await _execute(traced.runtime, _calculator_then_answer())
    assert told.status_code == 200  # the call ran: answered as the failed turn, not a 500
    assert told.json()["kind"] == "error"
    turn = traced.turn()
    assert turn["aptix.turn.kind"] == "error"
    assert turn["error.type"] == "internal_error"
    assert turn["gen_ai.usage.input_tokens"] == 10


async def test_a_turn_closed_elsewhere_while_it_ran_says_it_was_lost(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = traced.runtime.turns
    save = store.save

    async def closed_elsewhere(record: Any) -> Any:
        if any(e["state"] == "succeeded" for e in record.tool_calls):
            return False  # someone else closed the turn: the compare-and-set lost
        return await save(record)

    monkeypatch.setattr(store, "save", closed_elsewhere)
    _, told = await _execute(traced.runtime, _calculator_then_answer())
    assert told.status_code == 200, told.text
    turn = traced.turn()
    assert turn["error.type"] == "aptix.turn_lost"
    assert "aptix.turn.kind" not in turn  # how it ended is whoever closed it's to say
    assert turn["gen_ai.usage.input_tokens"] == 10


async def test_a_turn_that_starts_a_workflow_names_it_on_its_span(traced: Traced) -> None:
    start = {"operation": "start_workflow", "workflowId": "guided_calculation"}
    model = ScriptedModel.of(
        reply(None, call("agent_workflow_run", start, id="w1")), reply("Started.")
    )
    _, told = await _execute(traced.runtime, model)
    assert told.status_code == 200, told.text
    assert told.json()["kind"] == "ok"
    turn = traced.turn()
    assert turn["aptix.workflow.id"] == "guided_calculation"
    assert turn["aptix.mode"] == told.json()["mode"]
    # The call that started it ran before it was active; the model call after it, with it.
    [tool] = traced.spans("execute_tool agent_workflow_run")
    assert "aptix.workflow.id" not in dict(tool.attributes or {})
    _, after = traced.spans("chat ScriptedModel")
    assert dict(after.attributes or {})["aptix.workflow.id"] == "guided_calculation"


async def test_a_turn_that_ends_its_workflow_no_longer_names_it(traced: Traced) -> None:
    sessions = traced.runtime.services.sessions
    created = await sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    session_id = created.result.id
    await sessions.set_active_workflow(session_id, "guided_calculation", "acme", "ann")
    cancel = {
        "operation": "cancel_workflow",
        "workflowId": "guided_calculation",
        "reason": "the user asked",
    }
    model = ScriptedModel.of(
        reply(None, call("agent_workflow_run", cancel, id="w2")), reply("Stopped.")
    )
    result = await traced.runtime.reasoner(model).execute(
        session_id=session_id, org="acme", user="ann", instruction="stop it"
    )
    assert result.kind == "ok"
    [call_done] = result.tool_calls
    assert call_done["outcome"] == "succeeded", call_done
    session = await sessions.get_session(session_id, "acme")
    assert session.active_workflow_id is None
    turn = traced.turn()
    assert "aptix.workflow.id" not in turn
    [tool] = traced.spans("execute_tool agent_workflow_run")
    assert dict(tool.attributes or {})["aptix.workflow.id"] == "guided_calculation"
