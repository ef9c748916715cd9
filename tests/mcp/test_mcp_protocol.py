"""MCP transport edges: unreadable stdio lines and methods a stateless HTTP server refuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

from tests.api.live import serve


def test_an_unreadable_stdio_line_gets_a_json_rpc_error(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "aptix", "mcp"],
        env={**os.environ, "APTIX_DATA_DIR": str(tmp_path), "APTIX_SEMANTIC_MATCHING": "false"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    # At end of input the server stops, so whatever it answered is on stdout by then.
    out, _ = process.communicate('garbage \u0000 line\n{"no": "jsonrpc"}\n', timeout=60)
    answers = [json.loads(line) for line in out.splitlines()]
    assert len(answers) == 2, out
    assert {a["error"]["code"] for a in answers} == {-32700, -32600}
    assert all(a["id"] is None and a["jsonrpc"] == "2.0" for a in answers)


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
