"""A request whose client hung up before its answer was sent: an access line with status 499.

uvicorn writes no access line for an answer it cannot send (the client is gone), so such a
request left no line at all, while ``/metrics`` counted it ``200`` and its span said ``200``
(review r6 F6/F7). It is now one access line with 499 ("client closed the request", as nginx
says), counted under 499, and its server span is an error (``ConnectionError``), as a
streamed request's is when its client leaves.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from aptix.testing import reply
from aptix.testing.server import Hold, ScriptedOpenAIServer
from tests.api.live import scripted_model_env, served


def _lines(log: Path) -> list[dict[str, Any]]:
    parsed = []
    for line in log.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            parsed.append(json.loads(line))
    return parsed


def _wait_until_completed(url: str, session_id: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        turns = httpx.get(f"{url}/v1/sessions/{session_id}").json()["turns"]
        if turns and turns[-1]["status"] == "completed":
            return
        time.sleep(0.1)
    raise AssertionError("the turn never completed")


def test_a_plain_request_whose_client_left_is_logged_and_counted_499(tmp_path: Path) -> None:
    with ScriptedOpenAIServer([Hold(reply("too late"))]) as model:
        with served(
            tmp_path,
            **scripted_model_env(model.base_url),
            APTIX_LOG_JSON="true",
            APTIX_OTEL="true",
            OTEL_TRACES_EXPORTER="console",
            OTEL_BSP_SCHEDULE_DELAY="50",
        ) as running:
            session_id = httpx.post(f"{running.url}/v1/sessions", json={}).json()["sessionId"]
            with pytest.raises(httpx.ReadTimeout):  # the client gives up and hangs up
                httpx.post(
                    f"{running.url}/v1/agent/execute",
                    json={"sessionId": session_id, "instruction": "hi"},
                    headers={"X-Request-ID": "req-gone"},
                    timeout=httpx.Timeout(60, read=1.0),
                )
            model.wait_for_requests(1)
            model.release()  # the turn runs on and ends: its answer has no one to go to
            _wait_until_completed(running.url, session_id)
            metrics = httpx.get(f"{running.url}/metrics").text
        lines = _lines(running.log)
    route = 'method="POST",route="/v1/agent/execute"'
    assert f'aptix_http_requests_total{{{route},status="499"}} 1.0' in metrics
    assert f'{route},status="200"' not in metrics
    [access] = [
        line
        for line in lines
        if line.get("logger") == "uvicorn.access" and line.get("request_id") == "req-gone"
    ]
    assert access["status"] == 499
    assert access["method"] == "POST"
    assert access["path"] == "/v1/agent/execute"
    assert access["level"] == "info"
    [span] = [
        line
        for line in lines
        if line.get("name") == "POST /v1/agent/execute"
        and line["attributes"].get("aptix.request.id") == "req-gone"
    ]
    assert span["attributes"].get("http.response.status_code") != 200
    assert span["attributes"]["error.type"] == "ConnectionError"
    assert span["status"]["status_code"] == "ERROR"


def test_a_client_that_stays_gets_its_answer_and_a_200_line(tmp_path: Path) -> None:
    with ScriptedOpenAIServer([reply("in time")]) as model:
        with served(
            tmp_path, **scripted_model_env(model.base_url), APTIX_LOG_JSON="true"
        ) as running:
            session_id = httpx.post(f"{running.url}/v1/sessions", json={}).json()["sessionId"]
            answer = httpx.post(
                f"{running.url}/v1/agent/execute",
                json={"sessionId": session_id, "instruction": "hi"},
                headers={"X-Request-ID": "req-stays"},
                timeout=60,
            )
            assert answer.status_code == 200
            metrics = httpx.get(f"{running.url}/metrics").text
        lines = _lines(running.log)
    assert 'route="/v1/agent/execute",status="200"} 1.0' in metrics
    assert 'status="499"' not in metrics
    [access] = [
        line
        for line in lines
        if line.get("request_id") == "req-stays" and line.get("logger") == "uvicorn.access"
    ]
    assert access["status"] == 200
