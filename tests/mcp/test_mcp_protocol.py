"""MCP transport edges: unreadable stdio lines and methods a stateless HTTP server refuses."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

from aptix.mcp.stdio import TooLong, capped_lines
from tests.api.live import serve


def test_an_unreadable_stdio_line_gets_a_json_rpc_error(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "aptix", "mcp"],
        env={
            **os.environ,
            "APTIX_DATA_DIR": str(tmp_path),
            "APTIX_SEMANTIC_MATCHING": "false",
            "APTIX_MAX_BODY_BYTES": "4096",
        },
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    huge = '{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "' + "x" * 3_000_000
    # At end of input the server stops, so whatever it answered is on stdout by then.
    out, _ = process.communicate(
        f'garbage \u0000 line\n{{"no": "jsonrpc"}}\n{huge}"}}}}\n', timeout=60
    )
    answers = [json.loads(line) for line in out.splitlines()]
    assert len(answers) == 3, out
    assert [a["error"]["code"] for a in answers] == [-32700, -32600, -32600]
    assert all(a["id"] is None and a["jsonrpc"] == "2.0" for a in answers[:2])
    # The over-long request's id is read from its pieces: the client's call gets the refusal.
    assert answers[2]["id"] == 1
    assert answers[2]["error"]["message"] == (
        "Invalid Request: the line is longer than 4096 bytes (APTIX_MAX_BODY_BYTES); "
        "it was not read."
    )


class _Recording(io.BytesIO):
    largest = 0

    def readline(self, size: int | None = -1) -> bytes:
        line = super().readline(size)
        self.largest = max(self.largest, len(line))
        return line


async def test_stdio_lines_are_read_within_the_limit() -> None:
    source = _Recording(b"a" * 1_000_000 + b"\nshort\n" + b"b" * 1001)
    lines = [line async for line in capped_lines(source, 1000)]
    assert len(lines) == 3
    assert lines[1] == "short\n"
    assert lines[0] == lines[2] == TooLong(None)  # no request id in it: answered -32700
    assert source.largest <= 1001


def test_stateless_mcp_refuses_get_and_delete_with_405(tmp_path: Path) -> None:
    with serve(tmp_path, APTIX_SEMANTIC_MATCHING="false") as base:
        for method in ("GET", "DELETE"):
            response = httpx.request(
                method, f"{base}/mcp", headers={"Accept": "text/event-stream"}, timeout=10
            )
            assert response.status_code == 405
            assert response.headers["allow"] == "POST"
            assert response.json()["error"]["code"] == "method_not_allowed"


def test_transport_refusals_come_in_the_error_envelope(tmp_path: Path) -> None:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    with serve(tmp_path, APTIX_SEMANTIC_MATCHING="false") as base:
        refusals = [
            httpx.post(f"{base}/mcp", json={}, headers={**headers, "Host": "evil.example"}),
            httpx.post(
                f"{base}/mcp", json={}, headers={**headers, "Origin": "http://evil.example"}
            ),
            httpx.post(
                f"{base}/mcp", content=b"{}", headers={**headers, "Content-Type": "text/plain"}
            ),
        ]
    assert [r.status_code for r in refusals] == [421, 403, 400]
    for response in refusals:
        assert response.headers["content-type"] == "application/json"
        assert set(response.json()["error"]) == {"code", "message"}


def test_an_http_body_that_is_not_json_rpc_gets_a_json_rpc_error(tmp_path: Path) -> None:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    bodies = [
        b"garbage",
        b'{"no": "jsonrpc"}',
        # The SDK read an object id as a notification and answered 202 with nothing.
        b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}',
    ]
    with serve(tmp_path, APTIX_SEMANTIC_MATCHING="false") as base:
        answers = [httpx.post(f"{base}/mcp", content=b, headers=headers) for b in bodies]
        listed = httpx.post(
            f"{base}/mcp",
            json={"jsonrpc": "2.0", "id": 7, "method": "tools/list"},
            headers=headers,
        )
    assert [a.status_code for a in answers] == [400, 400, 400]
    assert [a.json()["error"]["code"] for a in answers] == [-32700, -32600, -32600]
    assert all(a.json()["id"] is None for a in answers)
    assert not any("pydantic" in a.text for a in answers)  # no validation dump
    assert listed.status_code == 200, listed.text
    assert listed.json()["id"] == 7
    assert listed.json()["result"]["tools"]
