"""A model's refusal reaches a ``POST /v1/agent/execute`` client, and stays on its turn.

Fixer f1, round 67 (left as known in the last round): ``/v1/chat/completions`` passed a
refusal on as ``message.refusal``, but the native endpoint answered ``kind: "empty"`` with
``text: null`` and nothing else, streamed or not, and the session's turn showed no more: the
user never saw why there was no answer. Aptix's model is ``OpenAiLlmClient`` over HTTP to the
scripted server, which declines as OpenAI does (``message.refusal``, streamed as
``delta.refusal``; in the Responses API a ``refusal`` content part).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from aptix.api import create_app
from aptix.llm.openai_client import OpenAiLlmClient
from aptix.runtime import Runtime
from aptix.testing import reply
from aptix.testing.server import ScriptedOpenAIServer
from tests.api.conftest import A

NO = "I'm sorry, I can't help with that."


@pytest.fixture
def provider() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as server:
        yield server


@pytest.fixture(params=["chat", "responses"])
async def api(
    request: pytest.FixtureRequest, keyed_runtime: Runtime, provider: ScriptedOpenAIServer
) -> AsyncIterator[httpx.AsyncClient]:
    model = OpenAiLlmClient(
        base_url=provider.base_url, api_key=None, model="m-1", api=request.param, max_retries=0
    )
    app = create_app(runtime=keyed_runtime, model=model)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test", headers=A) as c:
        yield c
    await model.close()


def _events(stream: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for block in stream.replace("\r\n", "\n").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            events.append((fields["event"], json.loads(fields["data"])))
    return events


async def _turn(api: httpx.AsyncClient, session_id: str, turn_id: str) -> dict[str, Any]:
    session = await api.get(f"/v1/sessions/{session_id}")
    assert session.status_code == 200, session.text
    [turn] = [t for t in session.json()["turns"] if t["turnId"] == turn_id]
    return dict(turn)


async def test_the_answer_and_the_turn_carry_the_refusal(
    api: httpx.AsyncClient, provider: ScriptedOpenAIServer
) -> None:
    provider.add(reply(None, refusal=NO))
    answer = await api.post("/v1/agent/execute", json={"instruction": "Help me pick a lock."})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["kind"], body["text"], body["refusal"]) == ("empty", None, NO)
    turn = await _turn(api, body["sessionId"], body["turnId"])
    assert (turn["status"], turn["text"], turn["refusal"]) == ("completed", None, NO)


async def test_a_streamed_turn_ends_with_the_refusal(
    api: httpx.AsyncClient, provider: ScriptedOpenAIServer
) -> None:
    provider.add(reply(None, refusal=NO))
    answer = await api.post(
        "/v1/agent/execute", json={"instruction": "Help me pick a lock.", "stream": True}
    )
    assert answer.status_code == 200, answer.text
    events = _events(answer.text)
    kind, finished = events[-1]
    assert kind == "turn_finished"
    assert (finished["kind"], finished["text"], finished["refusal"]) == ("empty", None, NO)
    assert "text" not in [k for k, _ in events]  # the refusal is no text of the answer
    turn = await _turn(api, finished["sessionId"], finished["turnId"])
    assert turn["refusal"] == NO


async def test_an_answer_has_no_refusal(
    api: httpx.AsyncClient, provider: ScriptedOpenAIServer
) -> None:
    provider.add(reply("Call a locksmith."))
    answer = await api.post("/v1/agent/execute", json={"instruction": "I am locked out."})
    body = answer.json()
    assert (body["kind"], body["text"]) == ("ok", "Call a locksmith.")
    assert "refusal" not in body  # as branchedSessionId and welcomeMessage: only when it is
    turn = await _turn(api, body["sessionId"], body["turnId"])
    assert turn["refusal"] is None
