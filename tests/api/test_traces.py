"""Standard traces behind the HTTP API: FastAPI's server span continues an incoming
``traceparent``, the turn's spans sit under it, and the ``OTEL_*`` variables choose where
they go. Spans are read back at a stdlib OTLP/HTTP receiver (tests/otlp.py)."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest

from aptix.api import create_app
from aptix.errors import ConfigurationError
from aptix.settings import AptixSettings
from aptix.telemetry import span_exporters
from aptix.testing import ScriptedModel, call, reply
from tests.otlp import OtlpReceiver


def _value(span: Any, key: str) -> Any:
    [found] = [a.value for a in span.attributes if a.key == key]
    return getattr(found, found.WhichOneof("value"))


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_turn_continues_the_callers_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    with OtlpReceiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "aptix-traceparent-test")
        monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
        settings = AptixSettings(
            data_dir=tmp_path, load_plugins=False, semantic_matching=False, otel=True
        )
        model = ScriptedModel.of(
            reply(None, call("agent_calculator", {"expression": "6*7"}, id="c1")),
            reply("42."),
        )
        app = create_app(settings, model=model)
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client,
        ):
            created = await client.post("/v1/sessions", json={})
            session_id = created.json()["sessionId"]
            assert (await client.get("/healthz")).status_code == 200  # a probe: no span
            answered = await client.post(
                "/v1/agent/execute",
                json={"sessionId": session_id, "instruction": "6*7?", "stream": stream},
                headers={"traceparent": f"00-{trace_id}-{parent_id}-01"},
            )
            assert answered.status_code == 200, answered.text
            assert "42." in answered.text
        # Closing the app's runtime flushed the batch to the receiver.
    spans = receiver.spans()
    assert {resource["service.name"] for resource, _ in spans} == {"aptix-traceparent-test"}
    assert not [s for _, s in spans if "/healthz" in s.name]
    traced = [s for _, s in spans if s.trace_id.hex() == trace_id]
    by_name: dict[str, list[Any]] = {}
    for span in traced:
        by_name.setdefault(span.name, []).append(span)
    [server] = by_name["POST /v1/agent/execute"]
    assert server.parent_span_id.hex() == parent_id
    assert server.kind == server.SPAN_KIND_SERVER
    [turn] = by_name["invoke_agent aptix"]
    assert turn.parent_span_id == server.span_id
    chats = by_name["chat ScriptedModel"]
    [tool] = by_name["execute_tool agent_calculator"]
    assert len(chats) == 2
    assert {c.parent_span_id for c in [*chats, tool]} == {turn.span_id}
    assert _value(turn, "gen_ai.conversation.id") == session_id
    assert _value(tool, "gen_ai.conversation.id") == session_id
    assert _value(turn, "aptix.turn.id") != session_id
    # The session was created in another request: its own trace, not this one.
    [create] = [s for _, s in spans if s.name == "POST /v1/sessions"]
    assert create.trace_id.hex() != trace_id


def test_otel_traces_exporter_chooses_the_exporters() -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    assert span_exporters({"OTEL_TRACES_EXPORTER": "none"}) == []
    [default] = span_exporters({})
    assert isinstance(default, OTLPSpanExporter)
    both = span_exporters({"OTEL_TRACES_EXPORTER": "console,otlp"})
    assert [type(e) for e in both] == [ConsoleSpanExporter, OTLPSpanExporter]
    with pytest.raises(ConfigurationError) as unknown:
        span_exporters({"OTEL_TRACES_EXPORTER": "zipkin"})
    assert "'zipkin'" in unknown.value.one_line()
    assert "console" in unknown.value.one_line()  # what is installed
    with pytest.raises(ConfigurationError) as protocol:
        span_exporters({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
    assert "http/json" in protocol.value.one_line()


def test_an_endpoint_from_otel_exporter_otlp_traces_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4999/x")
    [exporter] = span_exporters({})
    assert exporter._endpoint == "http://127.0.0.1:4999/x"  # type: ignore[attr-defined]
