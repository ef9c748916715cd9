"""``/mcp``: refusals in the documented shape; a client's cancel or hang-up reaches the server."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx
from mcp.client.client import Client

from tests.api.live import serve
from tests.tools.mcp_servers import flaky_server

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}


def test_refusals_say_what_is_wrong_in_the_documented_shape(tmp_path: Path) -> None:
    deep = '{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": %s}}' % (
        "[" * 300 + "]" * 300
    )
    with serve(tmp_path, APTIX_SEMANTIC_MATCHING="false") as base:
        nested = httpx.post(f"{base}/mcp", content=deep.encode(), headers=HEADERS)
        no_json = httpx.post(
            f"{base}/mcp", json=PING, headers={**HEADERS, "Accept": "text/event-stream"}
        )
        old = httpx.post(
            f"{base}/mcp", json=PING, headers={**HEADERS, "MCP-Protocol-Version": "1999-01-01"}
        )
        known = httpx.post(
            f"{base}/mcp", json=PING, headers={**HEADERS, "MCP-Protocol-Version": "2025-06-18"}
        )
    assert no_json.status_code == 406
    assert no_json.json()["error"]["code"] == "not_acceptable"
    assert "Accept: application/json" in no_json.json()["error"]["message"]
    assert old.status_code == 400
    assert old.json()["error"]["code"] == "bad_request"
    message = old.json()["error"]["message"]
    assert "Unsupported MCP-Protocol-Version header" in message
    assert "1999-01-01" in message
    assert "_meta" not in message
    assert known.status_code == 200
    assert known.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    # Well-formed JSON, deeper than the parser reads: a JSON-RPC error that says so.
    assert nested.status_code == 400
    assert nested.json()["error"]["code"] == -32600
    assert "nested too deeply" in nested.json()["error"]["message"]


def _calls(log: Path, text: str) -> list[str]:
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return [line.split()[0] for line in lines if line.endswith(f" {text}")]


async def _started(log: Path, text: str) -> None:
    """Wait until the server behind recorded the start of the call for ``text``."""
    with anyio.fail_after(30):
        while not _calls(log, text):  # noqa: ASYNC110 - another process writes the log
            await anyio.sleep(0.05)


#: How long each call would run upstream if nothing stopped it.
SLOW = 3


async def test_a_client_cancel_or_hang_up_cancels_the_upstream_call(tmp_path: Path) -> None:
    log = tmp_path / "flaky.log"
    servers = {"flaky": flaky_server(log, approval="never")}
    with serve(
        tmp_path, APTIX_SEMANTIC_MATCHING="false", APTIX_MCP_SERVERS=json.dumps(servers)
    ) as base:
        async with Client(f"{base}/mcp") as client, anyio.create_task_group() as group:

            async def cancelled() -> None:
                await client.call_tool("flaky_slow", {"text": "cancelled", "seconds": SLOW})

            group.start_soon(cancelled)
            await _started(log, "cancelled")
            group.cancel_scope.cancel()  # the SDK client sends notifications/cancelled
        call = {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "tools/call",
            "params": {"name": "flaky_slow", "arguments": {"text": "dropped", "seconds": SLOW}},
        }
        async with httpx.AsyncClient(timeout=30) as http, anyio.create_task_group() as group:

            async def dropped() -> None:
                await http.post(f"{base}/mcp", json=call, headers=HEADERS)

            group.start_soon(dropped)
            await _started(log, "dropped")
            group.cancel_scope.cancel()  # the client hangs up
        notified = {**call, "id": 10}
        notified["params"] = {
            "name": "flaky_slow",
            "arguments": {"text": "notified", "seconds": SLOW},
        }
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 10, "reason": "changed my mind"},
        }
        async with httpx.AsyncClient(timeout=30) as http, anyio.create_task_group() as group:
            answers: list[httpx.Response] = []
            # A cancel names a call of the client's own session: the one initialize gave it.
            initialized = await http.post(f"{base}/mcp", json=INITIALIZE, headers=HEADERS)
            session = {**HEADERS, "Mcp-Session-Id": initialized.headers["mcp-session-id"]}

            async def post() -> None:
                answers.append(await http.post(f"{base}/mcp", json=notified, headers=session))

            group.start_soon(post)
            await _started(log, "notified")
            accepted = await http.post(f"{base}/mcp", json=cancel, headers=session)
        await anyio.sleep(SLOW + 1)  # past the end of any call left running
    # Each started, and the server behind was told to stop: none ran to its end.
    assert _calls(log, "cancelled") == ["slow-start"]
    assert _calls(log, "dropped") == ["slow-start"]
    assert _calls(log, "notified") == ["slow-start"]
    assert accepted.status_code == 202
    # MCP: a cancelled request is not answered (as over stdio): 202 and no body.
    assert answers[0].status_code == 202, answers[0].text
    assert answers[0].content == b""
