"""The real ``openai`` client over HTTP against the scripted OpenAI-compatible server."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from aptix.errors import LlmError
from aptix.llm.openai_client import OpenAiLlmClient
from aptix.llm.types import LlmRequest
from aptix.reasoner.result import TurnEvent
from aptix.runtime import Runtime
from aptix.testing import call, reply
from aptix.testing.server import Fail, Hold, Raw, ScriptedOpenAIServer

REQUEST = LlmRequest(
    messages=({"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}),
    tools=(
        {
            "type": "function",
            "name": "agent_calculator",
            "description": "Calculates.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string", "description": "Expr."}},
                "required": ["expression"],
            },
        },
    ),
)


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(api_key="sk-test") as running:
        yield running


def _client(server: ScriptedOpenAIServer, api: str = "chat", **kw: object) -> OpenAiLlmClient:
    return OpenAiLlmClient(
        base_url=server.base_url,
        api_key="sk-test",
        model="m-1",
        api=api,
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_text_and_tool_calls_round_trip(server: ScriptedOpenAIServer, api: str) -> None:
    server.add(
        reply("Hello"), reply(None, call("agent_calculator", {"expression": "1+1"}, id="c9"))
    )
    client = _client(server, api)
    first = await client.complete(REQUEST)
    second = await client.complete(REQUEST)
    assert (first.text, first.usage.total_tokens, first.model_id) == ("Hello", 15, "scripted-model")
    [tool_call] = second.tool_calls
    assert (tool_call.id, tool_call.name, json.loads(tool_call.arguments)) == (
        "c9",
        "agent_calculator",
        {"expression": "1+1"},
    )
    assert second.finish_reason == "tool_calls"
    body = server.requests[0]
    assert body["model"] == "m-1"
    if api == "chat":
        assert server.paths[0] == "/v1/chat/completions"
        assert body["tools"][0] == {
            "type": "function",
            "function": {**{k: REQUEST.tools[0][k] for k in ("name", "description", "parameters")}},
        }
    else:
        assert server.paths[0] == "/v1/responses"
        assert body["tools"][0]["name"] == "agent_calculator"
        assert body["input"][1] == {"role": "user", "content": "Hi"}
    await client.close()


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_500_is_retried_then_succeeds(server: ScriptedOpenAIServer, api: str) -> None:
    server.add(Fail(500), reply("recovered"))
    client = _client(server, api, max_retries=2)
    assert (await client.complete(REQUEST)).text == "recovered"
    assert len(server.requests) == 2


async def test_a_timeout_is_reported_in_seconds(server: ScriptedOpenAIServer) -> None:
    server.add(Hold(reply("late")))  # never answers: the client's own limit ends the call
    client = _client(server, timeout_seconds=0.3, max_retries=0)
    with pytest.raises(LlmError, match=r"timed out after 0\.3 s; .*APTIX_LLM_TIMEOUT_SECONDS"):
        await client.complete(REQUEST)


async def test_a_401_says_the_key_was_refused(server: ScriptedOpenAIServer) -> None:
    client = OpenAiLlmClient(base_url=server.base_url, api_key="wrong", model="m")
    with pytest.raises(LlmError) as raised:
        await client.complete(REQUEST)
    assert "The model endpoint refused the API key" in str(raised.value)
    assert raised.value.status_code == 401


async def test_persistent_5xx_is_reported_with_status(server: ScriptedOpenAIServer) -> None:
    server.add(Fail(503, "overloaded"), Fail(503, "overloaded"))
    client = _client(server, max_retries=1)
    with pytest.raises(LlmError, match="answered HTTP 503"):
        await client.complete(REQUEST)


async def test_unreachable_endpoint_says_so() -> None:
    client = OpenAiLlmClient(
        base_url="http://127.0.0.1:9/v1", api_key="k", model="m", max_retries=0
    )
    with pytest.raises(LlmError, match=r"Cannot reach the model endpoint; is it running"):
        await client.complete(REQUEST)


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_full_turn_over_the_wire(
    server: ScriptedOpenAIServer, runtime: Runtime, api: str
) -> None:
    server.add(
        reply(None, call("agent_calculator", {"expression": "2*21"}, id="c1")),
        reply("The answer is 42."),
    )
    session = await runtime.services.sessions.create_session(org="acme", user="ann")
    assert session.result is not None
    result = await runtime.reasoner(_client(server, api)).execute(
        session_id=session.result.id, org="acme", user="ann", instruction="2*21?"
    )
    assert (result.kind, result.text) == ("ok", "The answer is 42.")
    if api == "chat":
        tool_message = server.requests[1]["messages"][-1]
        assert tool_message["role"] == "tool"
        assert json.loads(tool_message["content"])["result"] == 42
    else:
        item = server.requests[1]["input"][-1]
        assert item["type"] == "function_call_output"
        assert json.loads(item["output"])["result"] == 42
    server.assert_complete()


async def test_chat_streaming_passes_text_on_and_assembles_tool_calls(
    server: ScriptedOpenAIServer,
) -> None:
    server.add(
        reply(
            "Let me check that.",
            call("agent_calculator", {"expression": "12*12"}, id="s1"),
            call("agent_hello_world", {"name": "Ann"}, id="s2"),
        )
    )
    pieces: list[str] = []

    async def on_text(piece: str) -> None:
        pieces.append(piece)

    response = await _client(server).complete(REQUEST, on_text)
    assert pieces == ["Let ", "me ", "check ", "that."]
    assert response.text == "Let me check that."
    assert [(c.id, c.name, json.loads(c.arguments)) for c in response.tool_calls] == [
        ("s1", "agent_calculator", {"expression": "12*12"}),
        ("s2", "agent_hello_world", {"name": "Ann"}),
    ]
    assert response.usage.total_tokens == 15
    assert server.requests[0]["stream"] is True


@pytest.mark.parametrize(
    ("stream", "body"),
    [(False, b"not json at all"), (True, b"data: {not json\n\n"), (False, b'{"choices": 3}')],
)
async def test_an_unreadable_answer_is_a_model_error(
    server: ScriptedOpenAIServer, stream: bool, body: bytes
) -> None:
    server.add(Raw(body))
    client = _client(server, max_retries=0)

    async def sink(text: str) -> None:
        return None

    with pytest.raises(LlmError, match="sent a response Aptix cannot read"):
        await client.complete(REQUEST, sink if stream else None)


_CUT = (
    b'data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{"content":"Transfer to account "},"finish_reason":null}]}\n\n'
    b'data: {"id":"x","object":"chat.compl'
)


@pytest.mark.parametrize("body", [_CUT, b""], ids=["cut-mid-event", "no-chunk"])
async def test_a_stream_ending_without_a_finish_reason_is_a_model_error(
    server: ScriptedOpenAIServer, body: bytes
) -> None:
    server.add(Raw(body))
    pieces: list[str] = []

    async def sink(text: str) -> None:
        pieces.append(text)

    with pytest.raises(LlmError, match="stream ended before the answer was finished"):
        await _client(server, max_retries=0).complete(REQUEST, sink)


async def test_a_streamed_turn_cut_short_ends_in_error_not_with_the_fragment(
    server: ScriptedOpenAIServer, runtime: Runtime
) -> None:
    server.add(Raw(_CUT))
    session = await runtime.services.sessions.create_session(org="acme", user="ann")
    assert session.result is not None
    events: list[TurnEvent] = []

    async def on_event(event: TurnEvent) -> None:
        events.append(event)

    result = await runtime.reasoner(_client(server, max_retries=0)).execute(
        session_id=session.result.id,
        org="acme",
        user="ann",
        instruction="Pay the bill.",
        on_event=on_event,
    )
    assert (result.kind, result.text) == ("error", None)
    assert "stream ended before the answer was finished" in (result.error or "")
    kinds = [e.type for e in events]
    # The fragment was streamed as it came, but it is never given as the answer.
    assert (kinds[0], kinds[-1], "text" in kinds) == ("text_delta", "turn_finished", False)
    [turn] = await runtime.turns.list_turns(session.result.id, "acme")
    assert (turn.status, turn.text, turn.result and turn.result["errorCode"]) == (
        "error",
        None,
        "model_error",
    )
