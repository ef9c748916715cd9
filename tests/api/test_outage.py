"""PostgreSQL refusing connections: database routes answer 503 and recover by themselves."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.live import served
from tests.api.tcp_proxy import TcpProxy
from tests.databases import PG_HOST, PG_PORT, create_pg_database, drop_pg_database


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    forwarder = TcpProxy(PG_HOST, PG_PORT)
    forwarder.start()
    try:
        yield forwarder
    finally:
        forwarder.close()


def _client_port(response: httpx.Response) -> int:
    return int(response.extensions["network_stream"].get_extra_info("client_addr")[1])


def _mcp_call(client: httpx.Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    rpc = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    answer = client.post(
        "/mcp", json=rpc, headers={"Accept": "application/json, text/event-stream"}
    )
    assert answer.status_code == 200, answer.text
    text = answer.text
    if answer.headers["content-type"].startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    result: dict[str, Any] = json.loads(text)
    return result


def test_database_outage_answers_503_keeps_the_connection_and_recovers(
    tmp_path: Path, proxy: TcpProxy
) -> None:
    url = create_pg_database()
    proxied = url.replace(f"{PG_HOST}:{PG_PORT}", f"127.0.0.1:{proxy.port}")
    try:
        with (
            served(tmp_path, APTIX_DATABASE_URL=proxied, APTIX_SEMANTIC_MATCHING="false") as srv,
            httpx.Client(base_url=srv.url, limits=httpx.Limits(max_connections=1)) as client,
        ):
            session = client.post("/v1/sessions", json={}).json()["sessionId"]
            first = client.get("/v1/sessions")
            assert first.status_code == 200
            port = _client_port(first)

            proxy.stop()
            database_routes = [
                ("GET", "/v1/sessions", None),
                ("POST", "/v1/sessions", {}),
                ("GET", f"/v1/sessions/{session}", None),
                ("GET", "/healthz", None),
                # A tool that reaches the database: 503 like the routes, not its own failure.
                (
                    "POST",
                    "/v1/tools/agent_workflow_authoring/invoke",
                    {"arguments": {"operation": "list_authoring_workflows"}},
                ),
            ]
            down_until = time.monotonic() + 5
            answered = 0
            while time.monotonic() < down_until:
                for method, path, body in database_routes:
                    response = client.request(method, path, json=body)
                    assert response.status_code == 503, (path, response.text)
                    assert int(response.headers["retry-after"]) > 0
                    assert set(response.json()["error"]) == {"code", "message"}
                    assert _client_port(response) == port  # the same keep-alive connection
                    answered += 1
                # Over MCP a tool error says so, with or without a session.
                for arguments in ({"expression": "1+1", "sessionId": session}, None):
                    called = (
                        _mcp_call(client, "agent_calculator", arguments)
                        if arguments
                        else _mcp_call(
                            client,
                            "agent_workflow_authoring",
                            {"operation": "list_authoring_workflows"},
                        )
                    )
                    assert called["result"]["isError"] is True, called
                    assert called["result"]["content"][0]["text"] == (
                        "The database is unavailable right now; retry shortly."
                    )
                tools = client.get("/v1/tools")
                assert tools.status_code == 200  # routes without the database keep answering
                assert _client_port(tools) == port
                time.sleep(0.2)
            assert answered >= 8

            proxy.start()
            deadline = time.monotonic() + 30
            while (back := client.get("/v1/sessions")).status_code != 200:
                assert time.monotonic() < deadline, back.text
                time.sleep(0.2)
            assert session in [s["sessionId"] for s in back.json()]
            assert client.get("/healthz").status_code == 200
            log = srv.log.read_text()
    finally:
        drop_pg_database(url)
    assert "Traceback" not in log
    assert log.count("[HttpApi_Database__Unavailable]") == 1, log
    assert log.count("[Mcp_Database__Unavailable]") == 1, log
