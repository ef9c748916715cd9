"""Turns over HTTP: 409 session_busy, cancel, and paging a session's turns."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import update

from aptix.api import create_app
from aptix.db.types import utc_now
from aptix.llm.types import LlmRequest, LlmResponse
from aptix.reasoner.tables import TurnRow
from aptix.runtime import Runtime
from aptix.testing import FunctionModel, call, reply
from tests.api.conftest import A, B


class Gate:
    """A model that answers at once, except for requests whose instruction says 'wait'."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def answer(self, request: LlmRequest) -> LlmResponse:
        last = request.messages[-1]
        if last["role"] == "tool" and "hold" in str(last["content"]):
            self.entered.set()
            await self.release.wait()
            return reply("released")
        if last["role"] == "user" and "wait" in str(last["content"]):
            self.entered.set()
            await self.release.wait()
            return reply("released")
        if last["role"] == "user" and "crash" in str(last["content"]):
            raise RuntimeError("a bug in the model adapter")
        if last["role"] == "user" and "tool" in str(last["content"]):
            return reply(None, call("agent_calculator", {"expression": "1+1"}, id="c1"))
        return reply(f"answer to {last['content']}")


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
async def api(keyed_runtime: Runtime, gate: Gate) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(runtime=keyed_runtime, model=FunctionModel(gate.answer))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test", headers=A) as c:
        yield c


async def _session(api: httpx.AsyncClient) -> str:
    return str((await api.post("/v1/sessions", json={})).json()["sessionId"])


def _events(response: httpx.Response) -> list[tuple[str, dict[str, object]]]:
    """The ``(event, data)`` pairs of a Server-Sent Events body."""
    events, kind = [], ""
    for line in response.text.splitlines():
        if line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: "):
            events.append((kind, json.loads(line.removeprefix("data: "))))
    return events


async def test_a_second_request_during_a_running_turn_is_409_session_busy(
    api: httpx.AsyncClient, gate: Gate
) -> None:
    sid = await _session(api)
    first = asyncio.create_task(
        api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "wait"})
    )
    await gate.entered.wait()
    for body in (
        {"sessionId": sid, "instruction": "again"},
        {"sessionId": sid, "instruction": "again", "stream": True},
    ):
        busy = await api.post("/v1/agent/execute", json=body)
        assert busy.status_code == 409, busy.text
        assert busy.json()["error"]["code"] == "session_busy"
    gate.release.set()
    assert (await first).json()["text"] == "released"
    again = await api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "again"})
    assert again.json()["kind"] == "ok"


async def test_cancel_a_running_turn_over_http(api: httpx.AsyncClient, gate: Gate) -> None:
    sid = await _session(api)
    first = asyncio.create_task(
        api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "wait"})
    )
    await gate.entered.wait()
    [turn] = (await api.get(f"/v1/sessions/{sid}")).json()["turns"]
    assert turn["status"] == "running"
    url = f"/v1/sessions/{sid}/turns/{turn['turnId']}/cancel"
    # Another org's caller cannot see, let alone cancel, the turn.
    assert (await api.post(url, headers=B)).status_code == 404
    cancelled = await api.post(url)
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    answer = (await first).json()
    assert (answer["kind"], answer["turnId"]) == ("cancelled", turn["turnId"])
    again = await api.post(url)
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "turn_finished"
    missing = await api.post(f"/v1/sessions/{sid}/turns/nope/cancel")
    assert missing.status_code == 404
    after = await api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "next"})
    assert after.json()["text"] == "answer to next"


async def test_a_streamed_turn_cancelled_over_http_ends_with_turn_finished(
    api: httpx.AsyncClient, gate: Gate
) -> None:
    sid = await _session(api)
    body = {"sessionId": sid, "instruction": "wait", "stream": True}
    streamed = asyncio.create_task(api.post("/v1/agent/execute", json=body))
    await gate.entered.wait()
    [turn] = (await api.get(f"/v1/sessions/{sid}")).json()["turns"]
    cancelled = await api.post(f"/v1/sessions/{sid}/turns/{turn['turnId']}/cancel")
    assert cancelled.json()["status"] == "cancelled"
    events = _events(await streamed)
    assert [k for k, _ in events].count("turn_finished") == 1
    kind, data = events[-1]
    assert (kind, data["kind"], data["turnId"]) == ("turn_finished", "cancelled", turn["turnId"])


async def test_a_turn_that_fails_unexpectedly_says_so_streamed_or_not(
    api: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    sid = await _session(api)
    with caplog.at_level(logging.ERROR, logger="aptix"):
        plain = await api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "crash"})
    # Answered, not raised on to the server (which would drop the keep-alive connection),
    # and logged once with its traceback, by the reasoner that ended the turn.
    assert plain.status_code == 500
    assert plain.json()["error"]["code"] == "internal_error"
    logged = [r for r in caplog.records if r.exc_info]
    assert [r.getMessage().split()[0] for r in logged] == [
        "[AgentReasoner_ExecuteAsync__Exception]"
    ]
    body = {"sessionId": sid, "instruction": "crash again", "stream": True}
    streamed = await api.post("/v1/agent/execute", json=body)
    assert streamed.status_code == 200
    kind, data = _events(streamed)[-1]
    assert kind == "turn_finished"
    assert data == {
        "error": {
            "code": "internal_error",
            "message": "The server failed unexpectedly; it was logged.",
        }
    }
    # Both turns are on record as ended by the error; the session is free for the next one.
    turns = (await api.get(f"/v1/sessions/{sid}")).json()["turns"]
    assert [t["status"] for t in turns] == ["error", "error"]
    after = await api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "next"})
    assert after.json()["text"] == "answer to next"


async def test_a_running_resume_lists_no_pending_calls(
    api: httpx.AsyncClient, keyed_runtime: Runtime, gate: Gate
) -> None:
    sid = await _session(api)
    ask = FunctionModel(
        lambda _r: reply(None, call("request_user_approval", {"prompt": "Go?"}, id="u1"))
    )
    handed = await keyed_runtime.reasoner(ask).execute(
        session_id=sid, org="acme", user="ann", instruction="ask"
    )
    [turn] = (await api.get(f"/v1/sessions/{sid}")).json()["turns"]
    assert [c["callId"] for c in turn["pendingCalls"]] == ["u1"]
    body = {"sessionId": sid, "toolResults": [{"callId": "u1", "result": "hold"}]}
    resumed = asyncio.create_task(api.post("/v1/agent/execute", json=body))
    await gate.entered.wait()
    [turn] = (await api.get(f"/v1/sessions/{sid}")).json()["turns"]
    assert (turn["turnId"], turn["status"], turn["pendingCalls"]) == (handed.turn_id, "running", [])
    gate.release.set()
    assert (await resumed).json()["text"] == "released"


async def test_cancel_a_pending_turn(api: httpx.AsyncClient, keyed_runtime: Runtime) -> None:
    sid = await _session(api)
    app_model = FunctionModel(
        lambda _r: reply(None, call("request_user_approval", {"prompt": "Go?"}, id="u1"))
    )
    reasoner = keyed_runtime.reasoner(app_model)
    handed = await reasoner.execute(session_id=sid, org="acme", user="ann", instruction="ask")
    assert handed.kind == "tool-only"
    cancelled = await api.post(f"/v1/sessions/{sid}/turns/{handed.turn_id}/cancel")
    assert cancelled.json()["status"] == "cancelled"
    assert cancelled.json()["pendingCalls"] == []
    late = await api.post(
        "/v1/agent/execute",
        json={"sessionId": sid, "toolResults": [{"callId": "u1", "result": "yes"}]},
    )
    assert late.status_code == 409
    assert "No tool calls are waiting" in late.json()["error"]["message"]


async def test_turns_are_paged(api: httpx.AsyncClient) -> None:
    sid = await _session(api)
    for i in range(5):
        answer = await api.post(
            "/v1/agent/execute", json={"sessionId": sid, "instruction": f"q{i}"}
        )
        assert answer.status_code == 200
    page = (await api.get(f"/v1/sessions/{sid}?turnsLimit=2")).json()
    assert [t["instruction"] for t in page["turns"]] == ["q3", "q4"]
    assert page["turnsNextBefore"] == 4
    older = (await api.get(f"/v1/sessions/{sid}?turnsLimit=2&turnsBefore=4")).json()
    assert [t["instruction"] for t in older["turns"]] == ["q1", "q2"]
    oldest = (await api.get(f"/v1/sessions/{sid}?turnsLimit=2&turnsBefore=2")).json()
    assert [t["instruction"] for t in oldest["turns"]] == ["q0"]
    assert oldest["turnsNextBefore"] is None
    everything = (await api.get(f"/v1/sessions/{sid}")).json()
    assert len(everything["turns"]) == 5
    for bad in ("turnsLimit=0", "turnsLimit=201", "turnsBefore=0", "turnsLimit=x"):
        response = await api.get(f"/v1/sessions/{sid}?{bad}")
        assert response.status_code == 422, bad
        assert response.json()["error"]["code"] == "invalid_request"


async def test_a_turn_whose_process_died_shows_as_interrupted(
    api: httpx.AsyncClient, keyed_runtime: Runtime
) -> None:
    class Died(BaseException):
        pass

    sid = await _session(api)

    def crash(_request: LlmRequest) -> LlmResponse:
        raise Died

    with pytest.raises(Died):
        await keyed_runtime.reasoner(FunctionModel(crash)).execute(
            session_id=sid, org="acme", user="ann", instruction="hi"
        )
    [turn] = (await api.get(f"/v1/sessions/{sid}")).json()["turns"]
    assert turn["status"] == "running"  # its lease is live: it may run in another process
    async with keyed_runtime.database.transaction() as tx:
        await tx.execute(update(TurnRow).values(lease_until=utc_now() - timedelta(seconds=1)))
    [turn] = (await api.get(f"/v1/sessions/{sid}")).json()["turns"]
    assert turn["status"] == "interrupted"
    after = await api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "next"})
    assert after.json()["text"] == "answer to next"
