"""An ``error`` turn says why in ``GET /v1/sessions/{id}``, and the OpenAPI ``Turn`` says so."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import exc as sa

from aptix.api import create_app
from aptix.errors import LlmError
from aptix.llm import LlmRequest, LlmResponse
from aptix.reasoner.claims import Lease, start_plan
from aptix.reasoner.result import TurnResult
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, ScriptedModel, call, reply

FAILED = "The model endpoint answered 500: overloaded \x1b[31m(try later)."


@pytest.fixture
async def runtime(database_url: str, tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = AptixSettings(data_dir=tmp_path, database_url=database_url, load_plugins=False)
    async with open_runtime(settings) as opened:
        yield opened


@pytest.fixture
async def api(runtime: Runtime, model: ScriptedModel) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(runtime=runtime, model=model))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client


async def test_an_error_turn_shows_its_error_and_other_turns_show_null(
    api: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(
        reply(None, call("agent_calculator", {"expression": "1+1"}, id="c1")),
        LlmError(FAILED),
        reply("Fine."),
    )
    sid = (await api.post("/v1/sessions", json={})).json()["sessionId"]
    failed = await api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "add"})
    assert failed.json()["kind"] == "error"
    await api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "again"})
    shown = await api.get(f"/v1/sessions/{sid}")
    assert shown.status_code == 200
    first, second = shown.json()["turns"]
    assert first["status"] == "error"
    assert first["error"] == {"code": "model_error", "message": FAILED}
    assert [c["callId"] for c in first["toolCalls"]] == ["c1"]  # what ran stays shown
    assert (second["status"], second["error"]) == ("completed", None)
    assert "\x1b" not in shown.text  # the endpoint's control characters arrive escaped


async def test_every_field_a_turn_shows_is_declared_in_the_openapi_turn(
    api: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(reply("Hi."))
    sid = (await api.post("/v1/sessions", json={})).json()["sessionId"]
    await api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "hi"})
    shown = (await api.get(f"/v1/sessions/{sid}")).json()
    schemas = (await api.get("/openapi.json")).json()["components"]["schemas"]
    turn = schemas["Turn"]
    assert set(shown["turns"][0]) == set(turn["properties"]) == set(turn["required"])
    for field in ("modelCalls", "contextDropped", "error"):
        assert field in turn["properties"], field
    detail = schemas["SessionDetail"]
    assert set(shown) == set(detail["properties"]) == set(detail["required"])


async def _failed_turn(api: httpx.AsyncClient, instruction: str) -> dict[str, Any]:
    sid = (await api.post("/v1/sessions", json={})).json()["sessionId"]
    await api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": instruction})
    [turn] = (await api.get(f"/v1/sessions/{sid}")).json()["turns"]
    assert turn["status"] == "error"
    return dict(turn["error"])


async def test_a_turn_over_the_context_budget_shows_context_overflow(
    database_url: str, tmp_path: Path, model: ScriptedModel
) -> None:
    settings = AptixSettings(
        data_dir=tmp_path, database_url=database_url, load_plugins=False, llm_context_tokens=256
    )
    async with open_runtime(settings) as small:
        transport = httpx.ASGITransport(app=create_app(runtime=small, model=model))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as api:
            error = await _failed_turn(api, "word " * 2_000)
    assert error["code"] == "context_overflow"
    assert "context" in error["message"]
    assert model.requests == []  # refused before any model request


@pytest.mark.parametrize(
    ("crash", "code"),
    [
        (RuntimeError("a bug"), "internal_error"),
        (sa.OperationalError("SELECT 1", None, ConnectionRefusedError()), "database_unavailable"),
    ],
)
async def test_a_turn_ended_unexpectedly_shows_what_its_request_was_told(
    runtime: Runtime, crash: Exception, code: str
) -> None:
    async def answer(request: LlmRequest) -> LlmResponse:
        raise crash

    transport = httpx.ASGITransport(app=create_app(runtime=runtime, model=FunctionModel(answer)))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as api:
        sid = (await api.post("/v1/sessions", json={})).json()["sessionId"]
        told = await api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "go"})
        [turn] = (await api.get(f"/v1/sessions/{sid}")).json()["turns"]
    assert told.json()["error"]["code"] == code
    assert turn["status"] == "error"
    assert turn["error"]["code"] == code
    said = {"internal_error": "an unexpected error", "database_unavailable": "the database"}
    assert f"Ended because {said[code]}" in turn["error"]["message"]


async def test_the_turn_answer_gives_the_code_beside_the_message(
    api: httpx.AsyncClient, model: ScriptedModel
) -> None:
    # The same code GET /v1/sessions/{id} shows; ``error`` stays the message.
    model.add(LlmError(FAILED))
    sid = (await api.post("/v1/sessions", json={})).json()["sessionId"]
    body = {"sessionId": sid, "instruction": "hi", "stream": True}
    streamed = await api.post("/v1/agent/execute", json=body)
    assert '"errorCode": "model_error"' in streamed.text
    assert '"error": "The model endpoint answered 500' in streamed.text


async def test_an_error_turn_stored_before_its_code_shows_turn_failed(
    runtime: Runtime, api: httpx.AsyncClient
) -> None:
    sid = (await api.post("/v1/sessions", json={})).json()["sessionId"]
    decide = start_plan(
        session_id=sid,
        org="local",
        user="local",
        instruction="old",
        lease=Lease(),
        turn_id="o" * 32,
    )
    _, plan, _ = await runtime.turns.claim(sid, "local", "local", decide, history=1)
    assert plan.run is not None
    # What the earlier version stored: the answer alone, no code beside it.
    old = TurnResult(sid, "o" * 32, "error", "general", error="The model endpoint failed: 500.")
    plan.run.status = "error"
    plan.run.result = old.to_wire()
    assert await runtime.turns.save(plan.run)
    [turn] = (await api.get(f"/v1/sessions/{sid}")).json()["turns"]
    assert turn["error"] == {"code": "turn_failed", "message": "The model endpoint failed: 500."}


async def test_an_error_turn_whose_ending_could_not_be_stored_shows_its_real_code(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The database went away as the turn failed: its ending was kept in this process only
    # (ledger.ENDED_HERE), and a later read closes the turn with the same code.
    outage = sa.OperationalError("SELECT 1", None, ConnectionRefusedError())

    async def answer(request: LlmRequest) -> LlmResponse:
        raise outage

    save, settle = runtime.turns.save, runtime.turns.settle

    async def refuse_ending(record: Any) -> Any:
        if record.status == "error":
            raise outage
        return await save(record)

    async def refuse_settle(record: Any) -> Any:
        if record.status == "error":
            raise outage
        return await settle(record)

    monkeypatch.setattr(runtime.turns, "save", refuse_ending)
    monkeypatch.setattr(runtime.turns, "settle", refuse_settle)
    transport = httpx.ASGITransport(app=create_app(runtime=runtime, model=FunctionModel(answer)))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as api:
        sid = (await api.post("/v1/sessions", json={})).json()["sessionId"]
        await api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "go"})
        monkeypatch.setattr(runtime.turns, "save", save)
        monkeypatch.setattr(runtime.turns, "settle", settle)
        [turn] = (await api.get(f"/v1/sessions/{sid}")).json()["turns"]
    assert turn["status"] == "error"
    assert turn["error"]["code"] == "database_unavailable"
    assert "Ended because the database was unavailable" in turn["error"]["message"]
