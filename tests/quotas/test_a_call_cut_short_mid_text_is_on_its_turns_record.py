"""A model call cut short mid-text is on its turn's record, with what ``/v1/usage`` charged.

Review r7 F1 (round 72): a client that hung up on a streamed turn, or cancelled it, while the
model's text came was charged the call in ``/v1/usage`` (its prompt and the text it had
streamed, estimated), but the turn's ``modelCalls`` listed no call and its ``usage`` read 0
tokens, though the turn kept the text that call streamed. The call is now on the record,
marked ``estimated``, with the tokens it was charged; the turn's answer counts them too.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from aptix.api import create_app
from aptix.llm.types import LlmRequest, LlmResponse, TextSink
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from tests.api.hang_up import http_scope, stream_then_hang_up

KEY = "k-ann"
AUTH = {"Authorization": f"Bearer {KEY}"}


class StreamsThenStalls:
    """Streams eight words, then keeps the rest (and its usage) until the turn is cut short."""

    async def complete(self, request: LlmRequest, on_text: TextSink | None = None) -> LlmResponse:
        assert on_text is not None
        for i in range(8):
            await on_text(f"w{i} ")
        await asyncio.Event().wait()  # the last words and the usage chunk never come
        raise AssertionError("unreachable")


async def _stream_and_cut(app: Any, api: httpx.AsyncClient, session_id: str, ending: str) -> bytes:
    """Stream an instruction; once the eighth word arrived, hang up or cancel the turn."""

    async def cancel() -> None:
        session = (await api.get(f"/v1/sessions/{session_id}", headers=AUTH)).json()
        cancel = f"/v1/sessions/{session_id}/turns/{session['turns'][-1]['turnId']}/cancel"
        assert (await api.post(cancel, headers=AUTH)).status_code == 200
        await asyncio.Event().wait()  # the client reads on, to the turn's end

    scope = http_scope("/v1/agent/execute", {**AUTH, "content-type": "application/json"})
    body = {"sessionId": session_id, "instruction": "a long answer", "stream": True}
    return await stream_then_hang_up(
        app, scope, body, b"w7", cancel if ending == "cancel" else None
    )


@pytest.mark.parametrize("ending", ["hang-up", "cancel"])
async def test_a_call_cut_short_mid_text_is_on_the_turn_as_usage_charged_it(
    tmp_path: Path, database_url: str, ending: str
) -> None:
    settings = AptixSettings(
        data_dir=tmp_path,
        database_url=database_url,
        load_plugins=False,
        semantic_matching=False,
        api_keys=f"{KEY}=acme:ann:admin",
        token_budget="1000000/hour",
    )
    async with open_runtime(settings) as runtime:
        app = create_app(runtime=runtime, model=StreamsThenStalls())
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as api:
            created = await api.post("/v1/sessions", headers=AUTH, json={})
            session_id = created.json()["sessionId"]
            received = await _stream_and_cut(app, api, session_id, ending)
            assert b"w7" in received
            for _ in range(200):  # the charge and the ending are written as the turn winds down
                usage = (await api.get("/v1/usage", headers=AUTH)).json()
                [turn] = (await api.get(f"/v1/sessions/{session_id}", headers=AUTH)).json()["turns"]
                if usage["modelCalls"] and turn["status"] != "running":
                    break
                await asyncio.sleep(0.02)
    assert turn["status"] == "cancelled"
    assert turn["text"] == "".join(f"w{i} " for i in range(8))
    assert usage["modelCalls"] == 1
    [call] = turn["modelCalls"]
    assert call["estimated"] is True
    assert (call["promptTokens"], call["completionTokens"]) == (
        usage["promptTokens"],
        usage["completionTokens"],
    )
    assert call["promptTokens"] > 100
    assert 1 <= call["completionTokens"] <= 8
    if ending == "cancel":  # the client read the turn's answer: it counts the call too
        finished = received.split(b"event: turn_finished")[1].split(b"data: ", 1)[1]
        answer = json.loads(finished.split(b"\n", 1)[0])
        assert answer["usage"]["totalTokens"] == usage["totalTokens"]
