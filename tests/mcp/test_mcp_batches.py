"""JSON-RPC batches: answered as one array under protocol 2025-03-26, refused as such elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

from aptix.mcp.messages import EMPTY_BATCH, INITIALIZE_IN_BATCH, INVALID, batch_refused
from tests.api.live import serve

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
CANCEL_TOOLS = Path(__file__).parent.parent / "api" / "cancel_tools.py"


def _ping(request_id: object) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "ping"}


def _initialize(version: str, request_id: object = "init") -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }


NOTIFICATION = {"jsonrpc": "2.0", "method": "notifications/initialized"}
#: A batch whose every message is answered in its own way, in the batch's order.
MIXED = [
    _ping(2),
    NOTIFICATION,  # no answer
    {"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"},  # not a message: answered, id null
    _initialize("2025-03-26", 4),
    {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"cursor": "stale"}},
    [_ping(6)],  # a batch in a batch is no message
]


REFUSED = {"code": -32600, "message": INVALID}


def _answers_to_mixed(answers: list[dict[str, Any]]) -> None:
    assert answers[0] == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert answers[1] == {"jsonrpc": "2.0", "id": None, "error": REFUSED}
    assert answers[2]["id"] == 4
    assert answers[2]["error"] == {"code": -32600, "message": INITIALIZE_IN_BATCH}
    assert answers[3]["id"] == 5
    assert answers[3]["error"]["code"] == -32602
    assert answers[4]["error"] == REFUSED
    assert len(answers) == 5


def test_a_batch_is_answered_as_one_array_under_2025_03_26_and_refused_as_a_batch_later(
    tmp_path: Path,
) -> None:
    pings = [_ping(2), _ping(3)]
    with serve(tmp_path, APTIX_SEMANTIC_MATCHING="false") as base:
        old = {**HEADERS, "MCP-Protocol-Version": "2025-03-26"}
        answered = httpx.post(f"{base}/mcp", json=pings, headers=old)
        # No header: the spec says to assume 2025-03-26.
        mixed = httpx.post(f"{base}/mcp", json=MIXED, headers=HEADERS)
        notified = httpx.post(f"{base}/mcp", json=[NOTIFICATION], headers=old)
        empty = httpx.post(f"{base}/mcp", json=[], headers=old)
        new = {**HEADERS, "MCP-Protocol-Version": "2025-06-18"}
        refused = httpx.post(f"{base}/mcp", json=pings, headers=new)
    assert answered.status_code == 200, answered.text
    assert answered.json() == [
        {"jsonrpc": "2.0", "id": 2, "result": {}},
        {"jsonrpc": "2.0", "id": 3, "result": {}},
    ]
    assert mixed.status_code == 200, mixed.text
    _answers_to_mixed(mixed.json())
    # Notifications alone: nothing to answer (JSON-RPC 2.0 sends no empty array).
    assert notified.status_code == 202
    assert notified.content == b""
    assert empty.status_code == 400
    assert empty.json()["error"] == {"code": -32600, "message": EMPTY_BATCH}
    assert refused.status_code == 400
    assert refused.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": batch_refused("2025-06-18")},
    }
    assert "2025-03-26" in refused.json()["error"]["message"]
    assert "not a JSON-RPC 2.0 message" not in refused.json()["error"]["message"]


class _Stdio:
    """``aptix mcp`` in a subprocess, one line each way; killed if it stops answering."""

    def __init__(self, tmp_path: Path, **env: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "aptix", "mcp"],
            env={
                **os.environ,
                "APTIX_DATA_DIR": str(tmp_path),
                "APTIX_SEMANTIC_MATCHING": "false",
                **env,
            },
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.watchdog = threading.Timer(90, self.process.kill)
        self.watchdog.start()

    def send(self, message: object) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def read(self) -> Any:
        assert self.process.stdout is not None
        return json.loads(self.process.stdout.readline() or "null")

    def close(self) -> None:
        # The input stays open until every answer is read: at its end the server stops.
        self.watchdog.cancel()
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)
        self.process.stdout.close()


def _session(tmp_path: Path, version: str, **env: str) -> _Stdio:
    stdio = _Stdio(tmp_path, **env)
    stdio.send(_initialize(version))
    assert stdio.read()["result"]["protocolVersion"] == version
    stdio.send(NOTIFICATION)
    return stdio


def test_over_stdio_a_batch_is_answered_on_one_line_only_in_a_2025_03_26_session(
    tmp_path: Path,
) -> None:
    old = _session(tmp_path / "old", "2025-03-26")
    try:
        old.send(MIXED)
        mixed = old.read()
        old.send([NOTIFICATION])  # nothing to answer: the next line answers the next message
        old.send([])
        empty = old.read()
        old.send(_ping("last"))
        last = old.read()
    finally:
        old.close()
    new = _session(tmp_path / "new", "2025-11-25")
    try:
        new.send([_ping(2), _ping(3)])
        refused = new.read()
        new.send(_ping("last"))
        after = new.read()
    finally:
        new.close()
    _answers_to_mixed(mixed)
    assert empty["error"] == {"code": -32600, "message": EMPTY_BATCH}
    assert last == {"jsonrpc": "2.0", "id": "last", "result": {}}
    assert refused == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": batch_refused("2025-11-25")},
    }
    assert after == {"jsonrpc": "2.0", "id": "last", "result": {}}


def test_over_stdio_a_batch_call_cancelled_is_left_out_of_the_batch_answer(
    tmp_path: Path,
) -> None:
    started = tmp_path / "slow-started"
    stdio = _session(
        tmp_path, "2025-03-26", APTIX_TOOL_MODULES=str(CANCEL_TOOLS), CANCEL_DIR=str(tmp_path)
    )
    slow = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "slow"}}
    try:
        stdio.send([slow, _ping(6)])
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists()
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}
        stdio.send(cancel)
        # Without the cancelled call's settling, the batch would wait for it (a minute).
        answered = stdio.read()
        stdio.send(_ping("last"))
        last = stdio.read()
    finally:
        stdio.close()
    assert answered == [{"jsonrpc": "2.0", "id": 6, "result": {}}]
    assert last == {"jsonrpc": "2.0", "id": "last", "result": {}}


async def test_over_http_a_batch_call_cancelled_is_left_out_of_the_batch_answer(
    tmp_path: Path,
) -> None:
    started = tmp_path / "slow-started"
    slow = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "slow"}}
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}
    old = {**HEADERS, "MCP-Protocol-Version": "2025-03-26"}
    answers: dict[str, httpx.Response] = {}
    with serve(
        tmp_path,
        APTIX_SEMANTIC_MATCHING="false",
        APTIX_TOOL_MODULES=str(CANCEL_TOOLS),
        CANCEL_DIR=str(tmp_path),
    ) as base:
        async with httpx.AsyncClient(base_url=base, timeout=60) as http:
            opened = await http.post("/mcp", json=_initialize("2025-03-26"), headers=old)
            session = {**old, "Mcp-Session-Id": opened.headers["mcp-session-id"]}

            async def post(name: str, body: object) -> None:
                answers[name] = await http.post("/mcp", json=body, headers=session)

            async with anyio.create_task_group() as group:
                group.start_soon(post, "batch", [slow, _ping(6)])
                group.start_soon(post, "alone", [slow | {"id": 7}])
                for _ in range(1200):
                    if started.exists():
                        break
                    await anyio.sleep(0.05)
                await anyio.sleep(0.3)  # both calls are running
                await post("cancel", cancel)
                await post("cancel", {**cancel, "params": {"requestId": 7}})
    assert answers["cancel"].status_code == 202
    # As over stdio and as docs/mcp.md says: the cancelled call has no answer in the batch.
    assert answers["batch"].status_code == 200, answers["batch"].text
    assert answers["batch"].json() == [{"jsonrpc": "2.0", "id": 6, "result": {}}]
    # Nothing else to answer: no answer at all.
    assert answers["alone"].status_code == 202, answers["alone"].text
    assert answers["alone"].content == b""
