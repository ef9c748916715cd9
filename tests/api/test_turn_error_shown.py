"""An ``error`` turn says why in ``GET /v1/sessions/{id}``, and the OpenAPI ``Turn`` says so."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from aptix.api import create_app
from aptix.errors import LlmError
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import ScriptedModel, call, reply

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
    assert first["error"] == {"code": "turn_failed", "message": FAILED}
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
