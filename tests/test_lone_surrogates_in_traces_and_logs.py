"""A lone surrogate from outside (a model id, a finish reason, an endpoint's or a tool's error
message) reaches the collector and the log as U+FFFD: the OTLP exporter encodes a whole batch
at once, so one such string used to lose every span of the batch, other orgs' included."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from aptix.errors import LlmError
from aptix.log_setup import JsonLinesFormatter, LogContextFilter, PlainFormatter
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.telemetry import OtelTracing
from aptix.testing import ScriptedModel, reply
from aptix.tools.context import AgentToolCall
from tests.otlp import OtlpReceiver

#: What the real model client lets through: ``{"model": "evil\ud800model"}`` is valid JSON.
EVIL = "evil\ud800model"


def _texts(span: Any) -> list[str]:
    """Every text the exported span carries: name, status, attributes and events."""
    values = [*span.attributes, *(a for e in span.events for a in e.attributes)]
    texts = [span.name, span.status.message, *(e.name for e in span.events)]
    for attribute in values:
        value = attribute.value
        if value.WhichOneof("value") == "array_value":
            texts += [v.string_value for v in value.array_value.values]
        else:
            texts.append(value.string_value)
    return texts


async def test_one_orgs_lone_surrogates_lose_no_span_of_the_batch(
    settings: AptixSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    with OtlpReceiver() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
        monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
        async with open_runtime(settings.model_copy(update={"otel": True})) as runtime:
            sessions = runtime.services.sessions
            ids = {}
            for org in ("bravo", "acme"):
                created = await sessions.create_session(org=org, user="u")
                assert created.result is not None
                ids[org] = created.result.id
            answered = dataclasses.replace(reply("Fine."), model_id=EVIL, finish_reason=EVIL)
            acme = ScriptedModel.of(answered, LlmError(f"The endpoint said: {EVIL}"))
            bravo = ScriptedModel.of(reply("Hello."))
            for org, model in (("acme", acme), ("bravo", bravo), ("acme", acme)):
                await runtime.reasoner(model).execute(
                    session_id=ids[org], org=org, user="u", instruction="hi"
                )
            tracing = runtime.tracing
            assert isinstance(tracing, OtelTracing)
            # A tool's or an MCP server's error message reaches its span the same way.
            call = AgentToolCall("c1", "agent_calculator", "{}")
            with tracing.tool_call(call, session_id=ids["acme"], turn_id=None) as span:
                span.tool_outcome(outcome="failed", error=f"MCP server: {EVIL}")
        # Closing the runtime flushed the batch: one export request for all of it.
    spans = [s for _, s in collector.spans()]
    turns = [s for s in spans if s.name == "invoke_agent aptix"]
    by_session = sorted(
        str(a.value.string_value) for s in turns for a in s.attributes if a.key == "session.id"
    )
    assert by_session == sorted([ids["acme"], ids["bravo"], ids["acme"]])
    assert len([s for s in spans if s.name == "execute_tool agent_calculator"]) == 1
    texts = [t for s in spans for t in _texts(s)]
    assert "evil\ufffdmodel" in texts  # gen_ai.response.model and finish_reasons
    assert any("The endpoint said: evil\ufffdmodel" in t for t in texts)  # status and event
    assert any("MCP server: evil\ufffdmodel" in t for t in texts)
    assert not [t for t in texts if "\ud800" in t]


def _record(message: str) -> logging.LogRecord:
    record = logging.makeLogRecord(
        {"name": "aptix", "levelno": logging.ERROR, "levelname": "ERROR", "msg": message}
    )
    record.aptix_fields = {"Model": EVIL}
    return record


@pytest.mark.parametrize("formatter", [PlainFormatter, JsonLinesFormatter])
def test_a_lone_surrogate_leaves_a_utf8_log_file_its_line(
    tmp_path: Path, formatter: type[logging.Formatter]
) -> None:
    path = tmp_path / "aptix.log"
    handler = logging.FileHandler(path, encoding="utf-8")  # as `aptix chat`'s log file
    handler.setFormatter(formatter())
    handler.addFilter(LogContextFilter())
    logger = logging.getLogger("aptix.test.surrogates")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.handle(_record(f"The endpoint said: {EVIL}"))
    finally:
        logger.removeHandler(handler)
        handler.close()
    written = path.read_text(encoding="utf-8")
    assert "The endpoint said: evil\ufffdmodel" in written
    if formatter is JsonLinesFormatter:
        line = json.loads(written)
        assert line["message"] == "The endpoint said: evil\ufffdmodel"
        assert line["Model"] == "evil\ufffdmodel"
