"""OpenTelemetry spans of a turn, per the GenAI semantic conventions, through the SDK's
in-memory exporter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from aptix.errors import ConfigurationError
from aptix.llm.types import LlmRequest, LlmResponse, Usage
from aptix.reasoner import ToolResultInput
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.telemetry import (
    HAND_OFF_EVENT,
    NO_TRACING,
    REFUSAL_EVENT,
    OtelTracing,
    open_tracing,
    span_exporters,
)
from aptix.testing import FunctionModel, ScriptedModel, call, reply
from aptix.tools.executor import AgentToolExecutor
from aptix.tools.traced import TracedToolExecutor
from tests.otlp import OtlpReceiver


@dataclass
class Traced:
    runtime: Runtime
    exporter: InMemorySpanExporter


@pytest.fixture
async def traced(settings: AptixSettings) -> AsyncIterator[Traced]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    async with open_runtime(settings, tracing=OtelTracing(provider)) as runtime:
        yield Traced(runtime, exporter)


def _tree(spans: tuple[ReadableSpan, ...]) -> list[tuple[str, list[str]]]:
    """Each root span's name with its children's names, in start order."""
    ordered = sorted(spans, key=lambda s: s.start_time or 0)
    roots = [s for s in ordered if s.parent is None]
    return [
        (
            root.name,
            [
                s.name
                for s in ordered
                if s.parent is not None and s.parent.span_id == root.context.span_id
            ],
        )
        for root in roots
    ]


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_the_span_tree_of_a_turn_with_a_tool_call_and_a_hand_off(traced: Traced) -> None:
    runtime = traced.runtime
    created = await runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    session_id = created.result.id
    model = ScriptedModel.of(
        reply(
            None,
            call("agent_calculator", {"expression": "6*7"}, id="c1"),
            call("agent_workflow_authoring", {}, id="r1"),  # not offered in the general mode
            usage=Usage(100, 10),
        ),
        reply(
            None,
            call("request_user_approval", {"prompt": "Send 42?"}, id="u1"),
            usage=Usage(120, 5),
        ),
        reply("Sent.", usage=Usage(130, 3)),
    )
    reasoner = runtime.reasoner(model)
    first = await reasoner.execute(
        session_id=session_id, org="acme", user="ann", instruction="6*7, then send it"
    )
    assert first.kind == "tool-only"
    second = await reasoner.execute(
        session_id=session_id,
        org="acme",
        user="ann",
        tool_results=[ToolResultInput("u1", '{"approved": true}')],
    )
    assert second.kind == "ok"
    model.assert_complete()

    spans = traced.exporter.get_finished_spans()
    assert _tree(spans) == [
        (
            "invoke_agent aptix",
            [
                "chat ScriptedModel",
                "execute_tool agent_calculator",
                "chat ScriptedModel",
                "execute_tool request_user_approval",
            ],
        ),
        ("invoke_agent aptix", ["chat ScriptedModel"]),
    ]
    turns = [s for s in spans if s.name == "invoke_agent aptix"]
    turns.sort(key=lambda s: s.start_time or 0)
    handed, resumed = turns
    for turn in turns:
        attributes = _attrs(turn)
        assert attributes["gen_ai.operation.name"] == "invoke_agent"
        assert attributes["gen_ai.agent.name"] == "aptix"
        assert attributes["session.id"] == session_id
        assert attributes["gen_ai.conversation.id"] == session_id  # not the turn's id
        assert attributes["aptix.turn.id"] == first.turn_id
        assert attributes["aptix.mode"] == "general"
        assert turn.kind == SpanKind.INTERNAL
    assert _attrs(handed)["aptix.turn.kind"] == "tool-only"
    assert (
        _attrs(handed)["gen_ai.usage.input_tokens"],
        _attrs(handed)["gen_ai.usage.output_tokens"],
    ) == (220, 15)
    assert _attrs(resumed)["aptix.turn.resumed"] is True
    assert _attrs(resumed)["aptix.turn.kind"] == "ok"

    [hand_off] = [e for e in handed.events if e.name == HAND_OFF_EVENT]
    assert list(hand_off.attributes["gen_ai.tool.call.id"]) == ["u1"]  # type: ignore[index]
    [refusal] = [e for e in handed.events if e.name == REFUSAL_EVENT]
    assert refusal.attributes["gen_ai.tool.name"] == "agent_workflow_authoring"  # type: ignore[index]
    assert "not offered" in str(refusal.attributes["reason"])  # type: ignore[index]

    chats = sorted(
        (s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start_time or 0
    )
    assert [
        (_attrs(c)["gen_ai.usage.input_tokens"], _attrs(c)["gen_ai.usage.output_tokens"])
        for c in chats
    ] == [
        (100, 10),
        (120, 5),
        (130, 3),
    ]
    for chat in chats:
        assert chat.kind == SpanKind.CLIENT
        assert _attrs(chat)["gen_ai.operation.name"] == "chat"
        assert _attrs(chat)["gen_ai.response.model"] == "scripted-model"
    assert list(_attrs(chats[0])["gen_ai.response.finish_reasons"]) == ["tool_calls"]

    tools = {s.name: s for s in spans if s.name.startswith("execute_tool ")}
    calculator = _attrs(tools["execute_tool agent_calculator"])
    assert calculator["gen_ai.operation.name"] == "execute_tool"
    assert calculator["gen_ai.tool.call.id"] == "c1"
    assert calculator["gen_ai.conversation.id"] == session_id
    assert calculator["aptix.turn.id"] == first.turn_id
    assert tools["execute_tool agent_calculator"].status.status_code == StatusCode.UNSET
    assert _attrs(tools["execute_tool request_user_approval"])["aptix.tool.handed_off"] is True


async def test_a_failed_model_call_is_an_error_span(traced: Traced) -> None:
    from aptix.errors import LlmError

    created = await traced.runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    model = ScriptedModel.of(LlmError("Cannot reach the model endpoint."))
    result = await traced.runtime.reasoner(model).execute(
        session_id=created.result.id, org="acme", user="ann", instruction="hi"
    )
    assert result.kind == "error"
    by_name = {s.name: s for s in traced.exporter.get_finished_spans()}
    assert by_name["chat ScriptedModel"].status.status_code == StatusCode.ERROR
    assert by_name["invoke_agent aptix"].status.status_code == StatusCode.ERROR


async def test_tracing_is_off_by_default(settings: AptixSettings) -> None:
    assert open_tracing(settings) is NO_TRACING
    async with open_runtime(settings) as runtime:
        assert runtime.tracing is NO_TRACING
        assert type(runtime.executor) is AgentToolExecutor


async def test_aptix_otel_exports_over_otlp(
    settings: AptixSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "aptix-test")
    tracing = open_tracing(settings.model_copy(update={"otel": True}))
    assert isinstance(tracing, OtelTracing)
    provider = tracing._provider
    assert isinstance(provider, TracerProvider)
    assert provider.resource.attributes["service.name"] == "aptix-test"
    tracing.shutdown()


async def test_a_missing_otel_extra_is_a_configuration_error(
    settings: AptixSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)
    with pytest.raises(ConfigurationError) as raised:
        open_tracing(settings.model_copy(update={"otel": True}))
    assert "pip install 'aptix[otel]'" in raised.value.one_line()


def test_the_traced_executor_is_an_executor() -> None:
    assert issubclass(TracedToolExecutor, AgentToolExecutor)


async def test_the_active_workflow_and_its_refusals_are_on_the_spans(traced: Traced) -> None:
    sessions = traced.runtime.services.sessions
    created = await sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    session_id = created.result.id
    await sessions.set_active_workflow(session_id, "guided_calculation", "acme", "ann")
    model = ScriptedModel.of(
        reply(None, call("agent_hello_world", {"name": "Ann"}, id="h1")), reply("ok")
    )
    await traced.runtime.reasoner(model).execute(
        session_id=session_id, org="acme", user="ann", instruction="greet me"
    )
    spans = traced.exporter.get_finished_spans()
    [turn] = [s for s in spans if s.name == "invoke_agent aptix"]
    assert _attrs(turn)["aptix.workflow.id"] == "guided_calculation"
    inner = [s for s in spans if s.name.startswith(("chat ", "execute_tool "))]
    assert len(inner) == 2  # two model calls; the refused call did not run: no span
    for span in inner:  # DESIGN §12: mode and active workflow on every span of the turn
        assert _attrs(span)["aptix.workflow.id"] == "guided_calculation", span.name
        assert _attrs(span)["aptix.mode"] == "general", span.name
    refusals = [e for e in turn.events if e.name == REFUSAL_EVENT]
    assert [e.attributes["gen_ai.tool.call.id"] for e in refusals] == ["h1"]  # type: ignore[index]


async def test_spans_reach_an_otlp_collector_named_by_otel_variables(
    settings: AptixSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    with OtlpReceiver() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "aptix-otlp-test")
        async with open_runtime(settings.model_copy(update={"otel": True})) as runtime:
            created = await runtime.services.sessions.create_session(org="acme", user="ann")
            assert created.result is not None
            model = ScriptedModel.of(reply("Hello."))
            await runtime.reasoner(model).execute(
                session_id=created.result.id, org="acme", user="ann", instruction="hi"
            )
        # Closing the runtime flushed the batch: the collector has every span.
    names = set()
    services = set()
    for path, request in collector.received:
        assert path == "/v1/traces"
        for resource_spans in request.resource_spans:
            services |= {
                a.value.string_value
                for a in resource_spans.resource.attributes
                if a.key == "service.name"
            }
            names |= {s.name for scope in resource_spans.scope_spans for s in scope.spans}
    assert services == {"aptix-otlp-test"}
    assert names == {"invoke_agent aptix", "chat ScriptedModel"}


def test_console_spans_leave_json_output_intact(tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("APTIX_", "OTEL_"))},
        "APTIX_DATA_DIR": str(tmp_path),
        "APTIX_SEMANTIC_MATCHING": "false",
        "APTIX_OTEL": "true",
        "OTEL_TRACES_EXPORTER": "console",
    }
    command = ["tools", "call", "agent_calculator", '{"expression": "6*7"}', "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "aptix", *command],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"]["result"] == 42
    assert '"name": "execute_tool agent_calculator"' in done.stderr


@pytest.mark.parametrize(
    "variable", ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"]
)
def test_grpc_without_its_exporter_names_the_package_to_install(variable: str) -> None:
    assert "otlp_proto_grpc" not in {
        e.name for e in entry_points(group="opentelemetry_traces_exporter")
    }
    with pytest.raises(ConfigurationError) as raised:
        span_exporters({variable: "grpc"})
    line = raised.value.one_line()
    assert line.startswith(f"{variable}=grpc needs opentelemetry-exporter-otlp-proto-grpc")
    assert "pip install opentelemetry-exporter-otlp-proto-grpc" in line
    assert "OTEL_TRACES_EXPORTER" not in line  # the user never set it


async def test_a_mode_change_in_a_turn_shows_on_the_spans_after_it(traced: Traced) -> None:
    sessions = traced.runtime.services.sessions
    created = await sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    change = {"mode": "calculation", "branch": False, "reason": "numbers"}
    model = ScriptedModel.of(
        reply(None, call("agent_change_mode", change, id="m1")), reply("Now calculating.")
    )
    await traced.runtime.reasoner(model).execute(
        session_id=created.result.id, org="acme", user="ann", instruction="switch"
    )
    spans = sorted(traced.exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    modes = [(s.name, _attrs(s)["aptix.mode"]) for s in spans if s.name != "invoke_agent aptix"]
    assert modes == [
        ("chat ScriptedModel", "general"),
        ("execute_tool agent_change_mode", "general"),
        ("chat ScriptedModel", "calculation"),
    ]


async def test_a_summary_request_is_a_chat_span_of_its_turn(tmp_path: Path) -> None:
    # The summary is a model call like any other: its latency, tokens and failures belong
    # in the trace, and the turn's usage is the sum of its chat spans.
    settings = AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        llm_context_tokens=6000,
        context_strategy="summarize",
    )
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    async def answer(request: LlmRequest) -> LlmResponse:
        if "condense" in str(request.messages[0].get("content")):
            return reply("SUMMARY of what was said.")
        return reply("a long answer " + "with many words in it " * 60)

    async with open_runtime(settings, tracing=OtelTracing(provider)) as runtime:
        created = await runtime.services.sessions.create_session(org="acme", user="ann")
        assert created.result is not None
        reasoner = runtime.reasoner(FunctionModel(answer))
        for n in range(8):
            result = await reasoner.execute(
                session_id=created.result.id,
                org="acme",
                user="ann",
                instruction=f"turn {n} " + "a long question about things " * 40,
            )
            assert result.kind == "ok", result.error
        turns = await runtime.turns.list_turns(created.result.id, "acme")
    assert any(t.context_dropped and t.context_dropped["summarized"] for t in turns)
    spans = exporter.get_finished_spans()
    for turn_span in [s for s in spans if s.name == "invoke_agent aptix"]:
        chats = [
            s
            for s in spans
            if s.name.startswith("chat ")
            and s.parent is not None
            and s.parent.span_id == turn_span.context.span_id
        ]
        assert _attrs(turn_span)["gen_ai.usage.input_tokens"] == sum(
            _attrs(c)["gen_ai.usage.input_tokens"] for c in chats
        )
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) > 8  # eight turns' own calls, and the summary requests
