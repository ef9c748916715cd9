"""``aptix mcp`` answers a message whose id is neither a string nor an integer, as /mcp does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from aptix.mcp.messages import refusal

BAD_IDS = ['{"a": 1}', "1.5", "true", "null", "[1]"]


def _ping(message_id: str) -> str:
    return f'{{"jsonrpc": "2.0", "id": {message_id}, "method": "ping"}}'


def test_a_message_with_an_unusable_id_is_answered_over_stdio(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "aptix", "mcp"],
        env={**os.environ, "APTIX_DATA_DIR": str(tmp_path), "APTIX_SEMANTIC_MATCHING": "false"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    lines = [_ping(i) for i in BAD_IDS] + [_ping('"last"')]
    assert process.stdin is not None
    assert process.stdout is not None
    # The input stays open until every answer is read: at its end the server stops, and the
    # last ping could go unanswered then. A server that never answers is killed.
    watchdog = threading.Timer(60, process.kill)
    watchdog.start()
    try:
        process.stdin.write("\n".join(lines) + "\n")
        process.stdin.flush()
        answers = [json.loads(process.stdout.readline() or "null") for _ in lines]
    finally:
        watchdog.cancel()
        process.stdin.close()
        process.wait(timeout=60)
        process.stdout.close()
    for answer in answers[:-1]:
        assert answer == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32600, "message": "Invalid Request: not a JSON-RPC 2.0 message."},
        }
    assert answers[-1] == {"jsonrpc": "2.0", "id": "last", "result": {}}


@pytest.mark.parametrize("message_id", BAD_IDS)
def test_the_check_is_the_one_http_applies(message_id: str) -> None:
    answer = refusal(_ping(message_id).encode())
    assert answer is not None
    assert answer["id"] is None
    assert answer["error"] == {
        "code": -32600,
        "message": "Invalid Request: not a JSON-RPC 2.0 message.",
    }
    assert refusal(_ping("7").encode()) is None
    assert refusal(_ping('"x"').encode()) is None
