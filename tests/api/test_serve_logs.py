"""``aptix serve``'s log lines, read from a real process: JSON lines, request and session ids."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from aptix.testing import reply
from aptix.testing.server import ScriptedOpenAIServer
from tests.api.live import served


def _json_lines(log: Path) -> list[dict[str, Any]]:
    lines = log.read_text().splitlines()
    assert lines
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except json.JSONDecodeError:
            raise AssertionError(f"not a JSON line: {line!r}") from None
    return parsed


def test_with_log_json_every_line_is_json_with_request_and_session_ids(tmp_path: Path) -> None:
    with ScriptedOpenAIServer([reply("Hello there.")]) as model:
        with served(
            tmp_path,
            APTIX_LOG_JSON="true",
            APTIX_LOG_LEVEL="debug",
            APTIX_LLM_BASE_URL=model.base_url,
            APTIX_LLM_MODEL="m-1",
            APTIX_SEMANTIC_MATCHING="false",
        ) as running:
            created = httpx.post(
                f"{running.url}/v1/sessions", json={}, headers={"X-Request-ID": "req-create"}
            )
            session_id = created.json()["sessionId"]
            turn = httpx.post(
                f"{running.url}/v1/agent/execute",
                json={"sessionId": session_id, "instruction": "Hi"},
                headers={"X-Request-ID": "req-turn"},
                timeout=60,
            )
            assert turn.status_code == 200, turn.text
            assert turn.headers["x-request-id"] == "req-turn"
        lines = _json_lines(running.log)
    access = [line for line in lines if line["logger"] == "uvicorn.access"]
    by_id = {line["request_id"]: line for line in access}
    assert by_id["req-create"]["path"] == "/v1/sessions"
    assert by_id["req-turn"]["path"] == "/v1/agent/execute"
    assert by_id["req-turn"]["status"] == 200
    assert all(line["request_id"] for line in access)  # made up when the caller sent none
    turn_lines = [
        line
        for line in lines
        if line["logger"].startswith("aptix") and line["request_id"] == "req-turn"
    ]
    assert turn_lines, lines
    assert {line["session_id"] for line in turn_lines} == {session_id}
    assert all(line["conversation_id"] for line in turn_lines)
    assert any(line["message"].startswith("Aptix API on") for line in lines)
    assert any(line["logger"] == "uvicorn.error" for line in lines)


def test_serve_shows_an_access_log_at_the_default_level(tmp_path: Path) -> None:
    with served(tmp_path, APTIX_SEMANTIC_MATCHING="false") as running:
        answer = httpx.get(f"{running.url}/healthz", headers={"X-Request-ID": "req-plain"})
        assert answer.headers["x-request-id"] == "req-plain"
    text = running.log.read_text()
    [line] = [line for line in text.splitlines() if "[req-plain]" in line]
    assert "uvicorn.access [req-plain] 127.0.0.1:" in line
    assert '"GET /healthz HTTP/1.1" 200' in line
