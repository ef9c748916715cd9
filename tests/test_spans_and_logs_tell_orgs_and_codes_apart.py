"""Traces and logs tell orgs apart (the org's name on a turn's and a request's spans and on a
turn's log lines, the request id on the request's span), and a turn that ended in error has as
``error.type`` the code its record carries, not one code for every error ending."""

from __future__ import annotations

import contextlib
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import aptix.api.app as app_module
from aptix.api import create_app
from aptix.errors import LlmError
from aptix.log_setup import JsonLinesFormatter, LogContextFilter, PlainFormatter
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.telemetry import OtelTracing
from aptix.testing import ScriptedModel, call, reply


def _provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _attrs(spans: tuple[ReadableSpan, ...], name: str) -> list[dict[str, Any]]:
    return [dict(s.attributes or {}) for s in spans if s.name == name]


async def _turn(runtime: Runtime, model: ScriptedModel, instruction: str = "go") -> str:
    created = await runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    await runtime.reasoner(model).execute(
        session_id=created.result.id, org="acme", user="ann", instruction=instruction
    )
    return created.result.id


@pytest.mark.parametrize(
    ("update", "model", "instruction", "code"),
    [
        ({}, ScriptedModel.of(LlmError("The endpoint answered 500.")), "go", "model_error"),
        ({"llm_context_tokens": 256}, ScriptedModel(), "word " * 2_000, "context_overflow"),
        (
            {"max_iterations": 1},
            ScriptedModel.of(reply(None, call("agent_calculator", {"expression": "1"}))),
            "go",
            "iteration_cap",
        ),
    ],
    ids=["model_error", "context_overflow", "iteration_cap"],
)
async def test_a_turn_ending_in_error_has_its_records_code_as_error_type(
    settings: AptixSettings,
    update: dict[str, Any],
    model: ScriptedModel,
    instruction: str,
    code: str,
) -> None:
    provider, exporter = _provider()
    settings = settings.model_copy(update=update)
    async with open_runtime(settings, tracing=OtelTracing(provider)) as runtime:
        session_id = await _turn(runtime, model, instruction)
        [stored] = await runtime.turns.list_turns(session_id, "acme")
    assert stored.result is not None
    assert stored.result["errorCode"] == code  # what the record says
    [turn] = _attrs(exporter.get_finished_spans(), "invoke_agent aptix")
    assert turn["aptix.turn.kind"] == "error"
    assert turn["error.type"] == code


async def test_a_turns_spans_name_its_org(settings: AptixSettings) -> None:
    provider, exporter = _provider()
    model = ScriptedModel.of(
        reply(None, call("agent_calculator", {"expression": "6*7"}, id="c1")), reply("42.")
    )
    async with open_runtime(settings, tracing=OtelTracing(provider)) as runtime:
        await _turn(runtime, model)
    spans = exporter.get_finished_spans()
    for name in ("invoke_agent aptix", "chat ScriptedModel", "execute_tool agent_calculator"):
        assert {a["aptix.org.id"] for a in _attrs(spans, name)} == {"acme"}, name


async def test_the_request_span_names_the_org_and_the_request_id(tmp_path: Path) -> None:
    provider, exporter = _provider()
    settings = AptixSettings(
        data_dir=tmp_path, load_plugins=False, api_keys="secret-key-a=acme:ann"
    )
    async with open_runtime(settings, tracing=OtelTracing(provider)) as runtime:
        app = create_app(runtime=runtime, model=ScriptedModel.of(reply("Hi.")))
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": "Bearer secret-key-a"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers=headers
        ) as client:
            sid = (await client.post("/v1/sessions", json={})).json()["sessionId"]
            answered = await client.post(
                "/v1/agent/execute",
                json={"sessionId": sid, "instruction": "hi"},
                headers={"X-Request-ID": "req-42"},
            )
            assert answered.status_code == 200, answered.text
            refused = await client.get("/v1/tools", headers={"Authorization": "Bearer wrong"})
            assert refused.status_code == 401
    spans = exporter.get_finished_spans()
    [server] = _attrs(spans, "POST /v1/agent/execute")
    assert server["aptix.request.id"] == "req-42"
    assert server["aptix.org.id"] == "acme"
    [turn] = _attrs(spans, "invoke_agent aptix")
    assert turn["aptix.org.id"] == "acme"
    [created] = _attrs(spans, "POST /v1/sessions")
    assert created["aptix.org.id"] == "acme"
    assert len(created["aptix.request.id"]) == 32  # one the server made up
    [anonymous] = _attrs(spans, "GET /v1/tools")
    assert "aptix.org.id" not in anonymous  # no key, no org
    assert anonymous["aptix.request.id"]
    exported = json.dumps([dict(s.attributes or {}) for s in spans])
    assert "secret-key-a" not in exported


@pytest.mark.parametrize("keys", ["secret-key-a=acme:ann", None], ids=["key", "no keys"])
async def test_the_mcp_request_span_names_the_org(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keys: str | None
) -> None:
    """``POST /mcp``'s span carries the caller's org as every other route's does.

    Fixer f1, round 67: it had ``aptix.request.id`` but no ``aptix.org.id``, so a trace of an
    MCP client's calls could not be told apart by org (its ``execute_tool`` spans could).
    """
    provider, exporter = _provider()
    # /mcp is mounted by the app's own lifespan, which opens the runtime with this tracing.
    monkeypatch.setattr(app_module, "open_tracing", lambda *_, **__: OtelTracing(provider))
    settings = AptixSettings(
        data_dir=tmp_path, load_plugins=False, semantic_matching=False, api_keys=keys
    )
    app = create_app(settings)
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "agent_calculator", "arguments": {"expression": "6*7"}},
    }
    headers = {"Accept": "application/json, text/event-stream"}
    if keys is not None:
        headers["Authorization"] = "Bearer secret-key-a"
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000"
        ) as client,
    ):
        answered = await client.post("/mcp", json=call, headers=headers)
        assert answered.status_code == 200, answered.text
        assert answered.json()["result"]["isError"] is False
        if keys is not None:
            refused = await client.post(
                "/mcp", json=call, headers={**headers, "Authorization": "Bearer wrong"}
            )
            assert refused.status_code == 401
    spans = exporter.get_finished_spans()
    org = "acme" if keys is not None else "local"
    served, *anonymous = _attrs(spans, "POST /mcp")
    assert served["aptix.org.id"] == org
    assert served["aptix.request.id"]
    [tool] = _attrs(spans, "execute_tool agent_calculator")
    assert tool["aptix.org.id"] == org
    assert ["aptix.org.id" in a for a in anonymous] == ([False] if keys is not None else [])
    assert "secret-key-a" not in json.dumps([dict(s.attributes or {}) for s in spans])


@contextlib.contextmanager
def _captured() -> Iterator[dict[str, io.StringIO]]:
    """The ``aptix`` logger's lines at DEBUG, in plain text and in JSON."""
    outs = {"plain": io.StringIO(), "json": io.StringIO()}
    handlers = []
    for kind, formatter in (("plain", PlainFormatter()), ("json", JsonLinesFormatter())):
        handler = logging.StreamHandler(outs[kind])
        handler.setFormatter(formatter)
        handler.addFilter(LogContextFilter("-" if kind == "plain" else None))
        handlers.append(handler)
    logger = logging.getLogger("aptix")
    level = logger.level
    logger.handlers.extend(handlers)
    logger.setLevel(logging.DEBUG)
    try:
        yield outs
    finally:
        for handler in handlers:
            logger.removeHandler(handler)
        logger.setLevel(level)


async def test_a_turns_log_lines_name_its_org(settings: AptixSettings) -> None:
    async with open_runtime(settings) as runtime:  # it sets the loggers up: capture after
        with _captured() as captured:
            session_id = await _turn(runtime, ScriptedModel.of(LlmError("The endpoint is down.")))
    plain = [line for line in captured["plain"].getvalue().splitlines() if session_id in line]
    assert len(plain) >= 2  # the model's error and the turn's ending
    for line in plain:
        assert f" session_id={session_id} turn_id=" in line
        assert " org=acme " in line, line
    lines = [json.loads(line) for line in captured["json"].getvalue().splitlines()]
    turn_lines = [line for line in lines if line["session_id"] == session_id]
    assert len(turn_lines) == len(plain)
    assert {line["org"] for line in turn_lines} == {"acme"}
    assert any("The endpoint is down." in line["message"] for line in turn_lines)
