"""An endpoint's error that quotes the configured key reaches no one with the key in it.

A gateway or proxy may echo the key it refused, or the ``Authorization`` header it saw, in its
error message; the message then goes to the caller of the turn (any org's), the stored turn,
the log and the spans. The client knows its key and its extra headers' values: it masks them.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import AsyncIterator, Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import SecretStr

from aptix.errors import LlmError
from aptix.llm.openai_client import OpenAiLlmClient
from aptix.llm.types import LlmRequest
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.telemetry import OtelTracing
from aptix.testing.server import Fail, ScriptedOpenAIServer, Unfinished

KEY = "sk-MODELSECRET-7f3a9"
HEADER = "gw-HEADERSECRET-51c2"
REQUEST = LlmRequest([{"role": "user", "content": "hi"}])


@pytest.fixture
def endpoint() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(api_key=KEY) as server:
        yield server


def _client(endpoint: ScriptedOpenAIServer, api: str = "chat") -> OpenAiLlmClient:
    return OpenAiLlmClient(
        base_url=endpoint.base_url,
        api_key=KEY,
        model="scripted",
        api=api,  # type: ignore[arg-type]
        max_retries=0,
        extra_headers={"X-Gateway-Token": HEADER},
    )


@pytest.mark.parametrize(
    "failure",
    [
        Fail(400, f"Invalid request for key {KEY} (org acme)"),
        Fail(500, f"upstream said Authorization: Bearer {KEY}"),
        Fail(403, f"token {HEADER} is not allowed here"),
    ],
)
async def test_the_error_and_its_log_line_mask_the_key_and_header_values(
    endpoint: ScriptedOpenAIServer, failure: Fail, caplog: pytest.LogCaptureFixture
) -> None:
    endpoint.add(failure)
    client = _client(endpoint)
    with caplog.at_level(logging.DEBUG), pytest.raises(LlmError) as raised:
        await client.complete(REQUEST)
    await client.close()
    message = str(raised.value)
    assert KEY not in message
    assert HEADER not in message
    assert "***" in message
    assert raised.value.status_code == failure.status
    assert message.startswith(f"The model endpoint answered HTTP {failure.status}: ")
    # A traceback logged of it (its chained openai error quoted the key too) shows none.
    shown = "".join(traceback.format_exception(raised.value))
    assert KEY not in shown
    assert HEADER not in shown
    assert caplog.records, "the failure is logged"
    for record in caplog.records:
        assert KEY not in record.getMessage()
        assert HEADER not in record.getMessage()


@pytest.mark.parametrize("stream", [False, True])
async def test_a_responses_failure_masks_the_key_streamed_or_not(
    endpoint: ScriptedOpenAIServer, stream: bool
) -> None:
    endpoint.add(Unfinished("failed", f"bad key {KEY}"))
    client = _client(endpoint, "responses")

    async def sink(text: str) -> None:
        pass

    with pytest.raises(LlmError) as raised:
        await client.complete(REQUEST, sink if stream else None)
    await client.close()
    assert KEY not in str(raised.value)
    assert "bad key ***" in str(raised.value)


async def test_a_key_nothing_quotes_leaves_the_message_as_it_was(
    endpoint: ScriptedOpenAIServer,
) -> None:
    endpoint.add(Fail(400, "Invalid request: messages must not be empty"))
    client = _client(endpoint)
    with pytest.raises(LlmError) as raised:
        await client.complete(REQUEST)
    await client.close()
    assert "messages must not be empty" in str(raised.value)
    assert "***" not in str(raised.value)


@pytest.fixture
async def traced(
    settings: AptixSettings, endpoint: ScriptedOpenAIServer
) -> AsyncIterator[tuple[Runtime, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    settings = settings.model_copy(
        update={
            "llm_base_url": endpoint.base_url,
            "llm_api_key": SecretStr(KEY),
            "llm_model": "scripted",
            "llm_max_retries": 0,
        }
    )
    async with open_runtime(settings, tracing=OtelTracing(provider)) as runtime:
        yield runtime, exporter


async def test_a_turn_the_echo_ended_keeps_the_key_off_its_answer_record_and_spans(
    traced: tuple[Runtime, InMemorySpanExporter],
    endpoint: ScriptedOpenAIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    runtime, exporter = traced
    endpoint.add(Fail(400, f"Invalid request for key {KEY} (org acme)"))
    created = await runtime.services.sessions.create_session(org="other", user="bob")
    assert created.result is not None
    with caplog.at_level(logging.DEBUG):
        result = await runtime.reasoner().execute(
            session_id=created.result.id, org="other", user="bob", instruction="hi"
        )
    assert result.kind == "error"
    assert result.error is not None
    assert KEY not in result.error
    assert "***" in result.error
    [turn] = await runtime.turns.list_turns(created.result.id, "other")
    assert turn.status == "error"
    assert KEY not in repr(turn)
    for span in exporter.get_finished_spans():
        texts = [span.status.description or "", *map(str, (span.attributes or {}).values())]
        texts += [str(v) for e in span.events for v in (e.attributes or {}).values()]
        assert not any(KEY in text for text in texts), span.name
    assert not any(KEY in r.getMessage() for r in caplog.records)
