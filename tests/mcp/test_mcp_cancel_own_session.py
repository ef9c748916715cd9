"""``/mcp``: a client's ``notifications/cancelled`` stops its own call, never another client's.

JSON-RPC ids are unique per client only: two clients of one key (two IDE windows, one
service key shared by agents), or any two local clients when no keys are configured, number
their requests alike. A cancel names a call by the ``Mcp-Session-Id`` it came with.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from tests.api.live import serve
from tests.mcp.test_mcp_http_edges import HEADERS, SLOW, _calls, _started
from tests.tools.mcp_servers import flaky_server


def _http(name: str, key: str | None, sent: list[tuple[str, Any]]) -> httpx2.AsyncClient:
    """An HTTP client that notes the JSON-RPC it posts."""

    async def note(request: httpx2.Request) -> None:
        if request.method == "POST":
            sent.append((name, json.loads(request.content)))

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx2.AsyncClient(headers=headers, timeout=60, event_hooks={"request": [note]})


def _client(url: str, http: httpx2.AsyncClient) -> Client:
    """An SDK client speaking the 2025-06-18 handshake."""
    return Client(streamable_http_client(url, http_client=http), mode="legacy")


async def _two_clients_one_cancels(base: str, log: Path, key: str | None) -> dict[str, Any]:
    """A and B call alike; A gives up on its call (the SDK posts the cancel). B's answer."""
    sent: list[tuple[str, Any]] = []
    answers: dict[str, Any] = {}
    async with (
        _http("A", key, sent) as http_a,
        _http("B", key, sent) as http_b,
        _client(f"{base}/mcp", http_a) as a,
        _client(f"{base}/mcp", http_b) as b,
        anyio.create_task_group() as group,
    ):

        async def run_b() -> None:
            answers["B"] = await b.call_tool("flaky_slow", {"text": "B", "seconds": SLOW})

        group.start_soon(run_b)
        await _started(log, "B")
        with anyio.CancelScope() as giving_up:

            async def give_up() -> None:
                await _started(log, "A")
                giving_up.cancel()

            group.start_soon(give_up)
            await a.call_tool("flaky_slow", {"text": "A", "seconds": SLOW})
    calls = {name: message["id"] for name, message in sent if message.get("method") == "tools/call"}
    cancels = [m for n, m in sent if n == "A" and m.get("method") == "notifications/cancelled"]
    # The case in point: both calls had the same id, and A's cancel named it.
    assert calls["A"] == calls["B"]
    assert [c["params"]["requestId"] for c in cancels] == [calls["A"]]
    return answers


async def test_a_cancel_stops_only_the_senders_call_among_clients_of_one_key(
    tmp_path: Path,
) -> None:
    log = tmp_path / "flaky.log"
    servers = {"flaky": flaky_server(log, approval="never")}
    with serve(
        tmp_path,
        APTIX_SEMANTIC_MATCHING="false",
        APTIX_MCP_SERVERS=json.dumps(servers),
        APTIX_API_KEYS="key-a=acme:ann",
    ) as base:
        answers = await _two_clients_one_cancels(base, log, "key-a")
        await anyio.sleep(SLOW + 1)  # past the end of any call left running
    assert answers["B"].is_error is False, answers["B"]
    assert answers["B"].content[0].text == "B"
    assert _calls(log, "B") == ["slow-start", "slow-end"]
    assert _calls(log, "A") == ["slow-start"]  # A's own call was cancelled, upstream too


async def test_without_keys_each_client_cancels_only_its_own_call(tmp_path: Path) -> None:
    log = tmp_path / "flaky.log"
    servers = {"flaky": flaky_server(log, approval="never")}
    call = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {"name": "flaky_slow", "arguments": {"text": "", "seconds": SLOW}},
    }
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}

    def calling(text: str) -> dict[str, Any]:
        return {**call, "params": {**call["params"], "arguments": {"text": text, "seconds": SLOW}}}

    with serve(
        tmp_path, APTIX_SEMANTIC_MATCHING="false", APTIX_MCP_SERVERS=json.dumps(servers)
    ) as base:
        answers = await _two_clients_one_cancels(base, log, None)
        # Two clients that never initialized have no session: a cancel could name either
        # call, so it is acknowledged and reaches none.
        raw: dict[str, httpx.Response] = {}
        async with (
            httpx.AsyncClient(timeout=30) as c,
            httpx.AsyncClient(timeout=30) as d,
            anyio.create_task_group() as group,
        ):

            async def post(name: str, http: httpx.AsyncClient) -> None:
                raw[name] = await http.post(f"{base}/mcp", json=calling(name), headers=HEADERS)

            group.start_soon(post, "C", c)
            group.start_soon(post, "D", d)
            await _started(log, "C")
            await _started(log, "D")
            acknowledged = await c.post(f"{base}/mcp", json=cancel, headers=HEADERS)
        await anyio.sleep(SLOW + 1)
    assert answers["B"].is_error is False, answers["B"]
    assert _calls(log, "B") == ["slow-start", "slow-end"]
    assert _calls(log, "A") == ["slow-start"]
    assert acknowledged.status_code == 202
    for name in ("C", "D"):
        assert raw[name].json()["result"]["isError"] is False, raw[name].json()
        assert _calls(log, name) == ["slow-start", "slow-end"]
