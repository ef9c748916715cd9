"""The scripted server streams the Responses API as the real one does.

Review r3 (round 69), F2: a Responses request with ``"stream": true`` got the unstreamed JSON
body, so the ``openai`` SDK's ``responses.create(stream=True)`` yielded no event at all and
``responses.stream()`` raised "Didn't receive a `response.completed` event"; and the
unstreamed body failed the SDK's own ``Response`` type (``cache_write_tokens`` missing).
Every event here is read through the real SDK and checked against its types.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from openai import OpenAI
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from aptix.testing import call, reply
from aptix.testing.server import Delay, Fail, Hold, ScriptedOpenAIServer, Unfinished
from aptix.testing.server import _responses_body as responses_body

EVENT: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
ANSWER = reply(
    "Let me add them.",
    call("add", {"a": 1, "b": 2}, id="call_1"),
    call("add", {"a": 3, "b": 4}, id="call_2"),
)


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as running:
        yield running


def _client(server: ScriptedOpenAIServer) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=10)


def _events(server: ScriptedOpenAIServer) -> list[Any]:
    stream = _client(server).responses.create(model="m", input="hi", stream=True)
    events = list(stream)
    for event in events:  # each one is of the SDK's own event types, as sent
        EVENT.validate_python(event.to_dict())
    return events


def _text(events: list[Any]) -> str:
    return "".join(e.delta for e in events if e.type == "response.output_text.delta")


def test_a_streamed_answer_sends_the_event_sequence_of_the_responses_api(
    server: ScriptedOpenAIServer,
) -> None:
    server.add(ANSWER)
    events = _events(server)
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    pieces = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert pieces == ["Let ", "me ", "add ", "them."]
    assert _text(events) == "Let me add them."
    assert kinds.count("response.output_item.added") == kinds.count("response.output_item.done")
    assert kinds.count("response.output_item.added") == 3  # the message and two calls
    done = [e.arguments for e in events if e.type == "response.function_call_arguments.done"]
    assert [json.loads(a) for a in done] == [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
    # The arguments come in pieces that add up to the whole.
    assert "".join(
        e.delta for e in events if e.type == "response.function_call_arguments.delta"
    ) == "".join(done)
    final = events[-1].response
    assert (final.status, final.output_text) == ("completed", "Let me add them.")
    assert [(c.call_id, c.name) for c in final.output if c.type == "function_call"] == [
        ("call_1", "add"),
        ("call_2", "add"),
    ]
    assert final.usage is not None
    assert final.usage.total_tokens == 15
    assert server.requests[0]["stream"] is True


def test_the_sdk_stream_helper_reads_the_final_response(server: ScriptedOpenAIServer) -> None:
    server.add(ANSWER)
    with _client(server).responses.stream(model="m", input="hi") as stream:
        texts = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(texts) == final.output_text == "Let me add them."
    assert [c.call_id for c in final.output if c.type == "function_call"] == ["call_1", "call_2"]


@pytest.mark.parametrize(
    ("finish", "reason"), [("length", "max_output_tokens"), ("content_filter", "content_filter")]
)
def test_a_cut_answer_ends_with_response_incomplete(
    server: ScriptedOpenAIServer, finish: str, reason: str
) -> None:
    server.add(dataclasses.replace(reply("cut sho"), finish_reason=finish))
    events = _events(server)
    last = events[-1]
    assert last.type == "response.incomplete"
    assert last.response.status == "incomplete"
    assert last.response.incomplete_details.reason == reason
    assert last.response.output_text == "cut sho"


def test_a_refusal_is_streamed_as_refusal_events(server: ScriptedOpenAIServer) -> None:
    server.add(reply(None, refusal="I can't help with that."))
    events = _events(server)
    refused = "".join(e.delta for e in events if e.type == "response.refusal.delta")
    assert refused == "I can't help with that."
    assert [e.refusal for e in events if e.type == "response.refusal.done"] == [refused]


def test_an_unfinished_failed_answer_ends_with_response_failed(
    server: ScriptedOpenAIServer,
) -> None:
    server.add(Unfinished("failed", "The server had an error (id 7).", "server_error"))
    events = _events(server)
    assert [e.type for e in events] == [
        "response.created",
        "response.in_progress",
        "response.failed",
    ]
    failed = events[-1].response
    assert failed.status == "failed"
    assert (failed.error.code, failed.error.message) == (
        "server_error",
        "The server had an error (id 7).",
    )


def test_an_unfinished_answer_of_another_status_never_ends_its_stream(
    server: ScriptedOpenAIServer,
) -> None:
    server.add(Unfinished("cancelled"))
    events = _events(server)
    assert [e.type for e in events] == ["response.created"]
    assert events[0].response.status == "cancelled"


def test_a_scripted_failure_and_a_delay_stream_as_for_chat(server: ScriptedOpenAIServer) -> None:
    server.add(Fail(503, "overloaded"), Delay(0.01, reply("late")))
    with pytest.raises(Exception, match="overloaded"):
        _events(server)
    assert _text(_events(server)) == "late"


def test_a_held_answer_streams_its_first_words_then_the_rest_once_released(
    server: ScriptedOpenAIServer,
) -> None:
    server.add(Hold(reply("one two three four"), after_words=2))
    stream = _client(server).responses.create(model="m", input="hi", stream=True)
    seen: list[str] = []
    two_words = threading.Event()
    for event in stream:
        if event.type == "response.output_text.delta":
            seen.append(event.delta)
            if len(seen) == 2:  # these came before the model was let go on
                two_words.set()
                server.release()
        last = event
    assert two_words.is_set()
    assert seen == ["one ", "two ", "three ", "four"]
    assert last.type == "response.completed"


def test_the_unstreamed_body_is_a_valid_sdk_response() -> None:
    for step in (
        ANSWER,
        dataclasses.replace(reply("cut"), finish_reason="length"),
        reply(None, refusal="No."),
    ):
        Response.model_validate(responses_body(step, "m"))
