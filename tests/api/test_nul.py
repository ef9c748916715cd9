"""NUL characters: refused from clients, replaced in model text; SQLite and PostgreSQL alike."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp.client.client import Client

from aptix.mcp import build_mcp_server
from aptix.runtime import Runtime
from aptix.settings import AptixSettings
from aptix.testing import call, reply
from aptix.testing.server import ScriptedOpenAIServer
from tests.api.conftest import scripted_settings
from tests.databases import create_pg_database, drop_pg_database


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    url = create_pg_database()
    yield url
    drop_pg_database(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest) -> str | None:
    return None if request.param == "sqlite" else str(request.getfixturevalue("pg_url"))


@pytest.fixture
def settings(
    database_url: str | None, tmp_path: Path, model_server: ScriptedOpenAIServer
) -> AptixSettings:
    """The runtime's model is ``model_server``, scripted to send NUL and surrogates."""
    return scripted_settings(tmp_path, database_url, model_server)


@pytest.fixture
def client(no_model_client: httpx.AsyncClient) -> httpx.AsyncClient:
    """The app on that runtime, where client text is refused and model text stored."""
    return no_model_client


def _refused(response: httpx.Response) -> str:
    assert response.status_code == 422, response.text
    message = str(response.json()["error"]["message"])
    assert "NUL characters (\\u0000) are not accepted" in message
    return message


async def test_client_text_with_nul_is_refused_everywhere(client: httpx.AsyncClient) -> None:
    assert "'title'" in _refused(await client.post("/v1/sessions", json={"title": "a\x00b"}))
    session = (await client.post("/v1/sessions", json={"title": "fine"})).json()["sessionId"]
    _refused(
        await client.post(
            "/v1/agent/execute", json={"sessionId": session, "instruction": "hi\x00there"}
        )
    )
    change = {"mode": "calculation", "branch": False, "reason": "r\x00"}
    invoke = "/v1/tools/agent_change_mode/invoke"
    found = _refused(await client.post(invoke, json={"arguments": change, "sessionId": session}))
    assert "arguments.reason" in found
    as_text = '{"mode": "calculation", "branch": false, "reason": "r\\u0000"}'
    _refused(await client.post(invoke, json={"arguments": as_text, "sessionId": session}))
    _refused(await client.post(invoke, json={"arguments": {"k\x00": 1}}))
    _refused(await client.get("/v1/sessions/abc%00def"))
    _refused(await client.get("/v1/sessions?limit=1%00"))
    # Nothing of it was stored: the session is untouched, the list holds only it.
    listed = (await client.get("/v1/sessions")).json()
    assert [s["sessionId"] for s in listed] == [session]
    assert (await client.get(f"/v1/sessions/{session}")).json()["mode"] == "general"


async def test_model_text_with_nul_is_stored_with_a_replacement_character(
    client: httpx.AsyncClient, model_server: ScriptedOpenAIServer
) -> None:
    model_server.add(
        reply(
            "switching\x00now",
            call(
                "agent_change_mode",
                '{"mode": "calculation", "branch": false, "reason": "r\\u0000"}',
            ),
        ),
        reply("done\x00."),
    )
    answer = await client.post("/v1/agent/execute", json={"instruction": "go"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["kind"] == "ok", body
    assert body["text"] == "done\ufffd."
    assert body["mode"] == "calculation"
    stored = (await client.get(f"/v1/sessions/{body['sessionId']}")).json()
    turn = stored["turns"][-1]
    assert turn["status"] == "completed"
    assert turn["text"] == "done\ufffd."
    assert "\x00" not in answer.text + str(stored)


async def test_mcp_tool_arguments_with_nul_are_an_error_result(runtime: Runtime) -> None:
    async with Client(build_mcp_server(runtime)) as mcp:
        refused = await mcp.call_tool("agent_hello_world", {"name": "A\x00nn"})
    assert refused.is_error
    assert "NUL characters" in refused.content[0].text  # type: ignore[union-attr]


def _lone_refused(response: httpx.Response) -> str:
    assert response.status_code == 422, response.text
    message = str(response.json()["error"]["message"])
    assert "Lone surrogate characters" in message
    return message


async def test_client_text_with_a_lone_surrogate_is_refused_everywhere(
    client: httpx.AsyncClient, model_server: ScriptedOpenAIServer
) -> None:
    model_server.add(reply(None, call("request_user_approval", {"prompt": "Go?"}, id="u1")))
    handed = (await client.post("/v1/agent/execute", json={"instruction": "ask"})).json()
    session = handed["sessionId"]
    raw = '{"sessionId": "%s", "toolResults": [{"callId": "u1", "result": "\\ud800"}]}'
    found = _lone_refused(
        await client.post(
            "/v1/agent/execute",
            content=raw % session,
            headers={"content-type": "application/json"},
        )
    )
    assert "toolResults[0].result" in found
    nested = '{"sessionId": "%s", "toolResults": [{"callId": "u1", "result": {"a": ["\\udc00"]}}]}'
    _lone_refused(
        await client.post(
            "/v1/agent/execute",
            content=nested % session,
            headers={"content-type": "application/json"},
        )
    )
    invoke = "/v1/tools/agent_hello_world/invoke"
    _lone_refused(await client.post(invoke, json={"arguments": '{"name": "\\ud800"}'}))
    _lone_refused(
        await client.post(
            invoke,
            content='{"arguments": {"name": "A\\ud800"}}',
            headers={"content-type": "application/json"},
        )
    )
    # The session still waits for u1, and shows.
    shown = await client.get(f"/v1/sessions/{session}")
    assert shown.status_code == 200
    assert shown.json()["turns"][0]["status"] == "pending"
    model_server.add(reply("fine"))
    done = await client.post(
        "/v1/agent/execute",
        json={"sessionId": session, "toolResults": [{"callId": "u1", "result": "ok"}]},
    )
    assert done.json()["text"] == "fine"


async def test_model_text_with_a_lone_surrogate_is_stored_with_a_replacement(
    client: httpx.AsyncClient, model_server: ScriptedOpenAIServer
) -> None:
    model_server.add(
        reply("half\ud800", call("agent_hello_world", '{"name": "A\\udc00"}', id="h1")),
        reply("done\udfff."),
    )
    answer = await client.post("/v1/agent/execute", json={"instruction": "go"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["text"] == "done\ufffd."
    [hello] = body["toolCalls"]
    assert hello["argumentsJson"] == '{"name": "A\\ufffd"}'
    stored = await client.get(f"/v1/sessions/{body['sessionId']}")
    assert stored.status_code == 200
    assert stored.json()["turns"][-1]["status"] == "completed"
    # The session stays usable.
    model_server.add(reply("next"))
    again = await client.post(
        "/v1/agent/execute", json={"sessionId": body["sessionId"], "instruction": "more"}
    )
    assert again.json()["text"] == "next"
