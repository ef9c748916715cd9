"""Text stored before the edge refused lone surrogates stays readable (SQLite can hold it)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from aptix.api import create_app
from aptix.reasoner.claims import Lease, start_plan
from aptix.runtime import Runtime


@pytest.fixture
async def client(runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(runtime=runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        yield c


async def test_a_stored_turn_holding_a_lone_surrogate_stays_readable(
    runtime: Runtime, client: httpx.AsyncClient
) -> None:
    session = (await client.post("/v1/sessions", json={})).json()["sessionId"]
    decide = start_plan(
        session_id=session,
        org="local",
        user="local",
        instruction="poisoned",
        lease=Lease(),
        turn_id="t" * 32,
    )
    _, plan, _ = await runtime.turns.claim(session, "local", "local", decide, history=1)
    assert plan.run is not None
    # What an older version accepted from a client: kept as a JSON escape, so it stores.
    plan.run.pending_calls = [{"callId": "u1", "name": "request_user_approval"}]
    plan.run.tool_calls = [{"callId": "u1", "name": "x", "clientResult": "bad \udc00 text"}]
    plan.run.status = "pending"
    assert await runtime.turns.save(plan.run)
    shown = await client.get(f"/v1/sessions/{session}")
    assert shown.status_code == 200, shown.text
    [turn] = shown.json()["turns"]
    assert turn["toolCalls"][0]["clientResult"] == "bad \ufffd text"
    cancelled = await client.post(f"/v1/sessions/{session}/turns/{'t' * 32}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
