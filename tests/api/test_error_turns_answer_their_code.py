"""A ``kind: "error"`` answer of ``POST /v1/agent/execute`` carries ``errorCode`` beside ``error``.

The code is the stored turn's ``error.code``, so a client tells "the database failed after the
calls ran: do not send again" from a model error without parsing the message; ``error`` stays
the message. Other answers have ``errorCode`` null. The stored answer keeps its shape, and
``TurnResultBody`` declares every field the answer has.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import exc as sa

from aptix.api import create_app
from aptix.errors import LlmError
from aptix.llm import LlmClient, LlmRequest, LlmResponse
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, ScriptedModel, call, reply


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False)
    async with open_runtime(settings) as opened:
        yield opened


async def _client(runtime: Runtime, model: LlmClient) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=create_app(runtime=runtime, model=model))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")


async def _answers(api: httpx.AsyncClient, instruction: str) -> list[dict[str, Any]]:
    """The JSON answer of one turn and the ``turn_finished`` of the same turn streamed."""
    sid = (await api.post("/v1/sessions", json={})).json()["sessionId"]
    told = await api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": instruction})
    assert told.status_code == 200, told.text
    body = {"sessionId": sid, "instruction": instruction, "stream": True}
    streamed = await api.post("/v1/agent/execute", json=body)
    finished = streamed.text.split("event: turn_finished")[-1]
    data = json.loads(finished.split("data: ", 1)[1].split("\n", 1)[0])
    return [told.json(), data]


async def _stored(runtime: Runtime, session_id: str) -> dict[str, Any]:
    turns = await runtime.turns.list_turns(session_id, "local")
    assert turns[-1].result is not None
    return turns[-1].result


async def test_a_model_error_answers_model_error_and_an_ok_turn_null(runtime: Runtime) -> None:
    model = ScriptedModel()
    model.add(LlmError("overloaded"), LlmError("overloaded"), reply("Fine."))
    async with await _client(runtime, model) as api:
        for answer in await _answers(api, "hi"):
            assert (answer["kind"], answer["errorCode"]) == ("error", "model_error")
            assert answer["error"] == "overloaded"
        sid = (await api.post("/v1/sessions", json={})).json()["sessionId"]
        ok = await api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "hi"})
    assert (ok.json()["kind"], ok.json()["errorCode"]) == ("ok", None)
    assert "error" not in ok.json()
    # The stored answers keep their shape: the code on an error ending only.
    assert "errorCode" not in await _stored(runtime, sid)


async def test_a_turn_over_the_context_budget_answers_context_overflow(tmp_path: Path) -> None:
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, llm_context_tokens=256)
    async with open_runtime(settings) as small, await _client(small, ScriptedModel()) as api:
        for answer in await _answers(api, "word " * 2_000):
            assert (answer["kind"], answer["errorCode"]) == ("error", "context_overflow")
            assert isinstance(answer["error"], str)


async def test_the_database_failing_after_the_calls_ran_answers_database_unavailable(
    runtime: Runtime,
) -> None:
    async def calculate_then_fail(request: LlmRequest) -> LlmResponse:
        if request.messages[-1].get("role") == "tool":
            raise sa.OperationalError("SELECT 1", None, ConnectionRefusedError())
        return reply(None, call("agent_calculator", {"expression": "6*7"}))

    async with await _client(runtime, FunctionModel(calculate_then_fail)) as api:
        answers = await _answers(api, "go")
        for answer in answers:
            assert (answer["kind"], answer["errorCode"]) == ("error", "database_unavailable")
            assert "sending it again would run them again" in answer["error"]
        stored = await _stored(runtime, answers[0]["sessionId"])
        shown = (await api.get(f"/v1/sessions/{answers[0]['sessionId']}")).json()
    assert stored["errorCode"] == shown["turns"][-1]["error"]["code"] == "database_unavailable"


async def test_turn_result_body_declares_every_field_of_the_answer(runtime: Runtime) -> None:
    model = ScriptedModel()
    model.add(LlmError("overloaded"), reply(None, call("request_user_approval", {"prompt": "?"})))
    async with await _client(runtime, model) as api:
        schemas = (await api.get("/openapi.json")).json()["components"]["schemas"]
        sid = (await api.post("/v1/sessions", json={})).json()["sessionId"]
        failed = await api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "a"})
        waiting = await api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "b"})
    declared = schemas["TurnResultBody"]["properties"]
    for answer in (failed.json(), waiting.json()):
        assert set(answer) <= set(declared), set(answer) - set(declared)
    for field in ("error", "errorCode", "branchedSessionId", "welcomeMessage", "refusal"):
        assert field in declared, field
    assert set(schemas["TurnResultBody"]["required"]) >= {"errorCode", "kind", "sessionId"}
