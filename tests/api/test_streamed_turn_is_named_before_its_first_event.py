"""A streamed ``POST /v1/agent/execute`` names its turn in ``X-Aptix-Turn`` before any event.

Review s3 F1 (round 72): the stream named its turn only in ``turn_finished``, so a client
whose stream was cut short (the server killed) could only guess its turn as "the first after
the last one I read", which is another client's when one added a turn meanwhile. The console
then decided from that other turn and sent the instruction again after its own call had run.
Against a real ``aptix serve``: the header must arrive while the model still thinks.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from aptix.testing import call, reply
from aptix.testing.server import Delay, Step
from tests.api.live import serve_scripted

#: How long the model takes to answer "slowly": the header comes well before.
SLOW_SECONDS = 4


def _respond(body: dict[str, Any]) -> Step:
    last = body["messages"][-1]
    if last["role"] == "tool":
        return reply("Approved.")
    if last.get("content") == "ask me":
        return reply(None, call("request_user_approval", {"prompt": "Go?"}, id="ask-1"))
    return Delay(SLOW_SECONDS, reply("Slow answer."))


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve_scripted(tmp_path_factory.mktemp("turn-header"), _respond) as url:
        yield url


def _events(text: str) -> list[tuple[str, dict[str, Any]]]:
    events: list[tuple[str, dict[str, Any]]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            events.append((fields["event"], json.loads(fields["data"])))
    return events


def _post(url: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{url}/v1/agent/execute", json=body, timeout=60)


def test_the_header_names_the_turn_before_the_model_has_answered(url: str) -> None:
    session_id = _post(url, {"instruction": "ask me"}).json()["sessionId"]
    _post(url, {"sessionId": session_id, "toolResults": [{"callId": "ask-1", "result": "yes"}]})
    # A second turn of the session: the header names it, not the session's first.
    began = time.monotonic()
    body = {"sessionId": session_id, "instruction": "answer slowly", "stream": True}
    with httpx.stream("POST", f"{url}/v1/agent/execute", json=body, timeout=60) as answer:
        assert answer.status_code == 200
        named = answer.headers["X-Aptix-Turn"]
        assert time.monotonic() - began < SLOW_SECONDS  # before any event: the model waits
        events = _events(answer.read().decode())
    assert events[-1][0] == "turn_finished"
    assert events[-1][1]["turnId"] == named
    turns = httpx.get(f"{url}/v1/sessions/{session_id}", timeout=30).json()["turns"]
    assert [(t["turnId"], t["instruction"]) for t in turns][-1] == (named, "answer slowly")


def test_a_streamed_resume_and_its_replay_name_the_waiting_turn(url: str) -> None:
    handed = _post(url, {"instruction": "ask me"}).json()
    resume = {
        "sessionId": handed["sessionId"],
        "toolResults": [{"callId": "ask-1", "result": "yes"}],
        "stream": True,
    }
    for _ in ("resumed", "replayed"):
        answer = _post(url, resume)
        assert answer.status_code == 200, answer.text
        assert answer.headers["X-Aptix-Turn"] == handed["turnId"]
        assert _events(answer.text)[-1][1]["turnId"] == handed["turnId"]


def test_a_json_answer_carries_its_turn_in_the_body_and_the_header_is_declared(url: str) -> None:
    answer = _post(url, {"instruction": "ask me"})
    assert answer.json()["turnId"]
    assert "X-Aptix-Turn" not in answer.headers
    document = httpx.get(f"{url}/openapi.json", timeout=30).json()
    declared = document["paths"]["/v1/agent/execute"]["post"]["responses"]["200"]["headers"]
    assert "X-Aptix-Turn" in declared
