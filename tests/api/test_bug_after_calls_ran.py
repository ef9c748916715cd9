"""A turn a bug ends after its calls ran is answered as a failed turn, never a 500.

The ``openai`` SDK sends a request again by itself on any 5xx: after a bug that struck once the
request's calls ran, the new turn would run them again. As for a database failure at that
point, ``/v1/agent/execute`` answers the turn as it ended (``kind: "error"``, its calls with
their outcomes) and ``/v1/chat/completions`` a 422 ``internal_error`` the SDK does not retry.
A bug before anything ran stays a 500.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from aptix.api import create_app
from aptix.llm import LlmRequest, LlmResponse
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, call, reply
from tests.logs import records_of

HEADER = "X-Aptix-Session"
BUG = "a bug in the second model call \x1b[2J"


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False)
    async with open_runtime(settings) as opened:
        yield opened


async def _calculate_then_break(request: LlmRequest) -> LlmResponse:
    """The calculator runs; the model call that follows it fails with a bug."""
    if request.messages[-1].get("role") == "tool":
        raise RuntimeError(BUG)
    return reply(None, call("agent_calculator", {"expression": "6*7"}))


@pytest.fixture
async def api(runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(runtime=runtime, model=FunctionModel(_calculate_then_break))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client


@pytest.fixture
def log() -> Iterator[list[logging.LogRecord]]:
    with records_of("aptix") as records:
        yield records


async def _session(api: httpx.AsyncClient) -> str:
    return str((await api.post("/v1/sessions", json={})).json()["sessionId"])


async def _ran_once(api: httpx.AsyncClient, session_id: str) -> dict[str, Any]:
    """The session's one turn, which ran the calculator once and ended with the bug."""
    [turn] = (await api.get(f"/v1/sessions/{session_id}")).json()["turns"]
    [ran] = turn["toolCalls"]
    assert (ran["name"], ran["outcome"], ran["wasExecuted"]) == (
        "agent_calculator",
        "succeeded",
        True,
    )
    assert (turn["status"], turn["error"]["code"]) == ("error", "internal_error"), turn
    return dict(turn)


async def test_execute_answers_the_turn_with_the_call_that_ran(
    api: httpx.AsyncClient, log: list[logging.LogRecord]
) -> None:
    sid = await _session(api)
    told = await api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "go"})
    assert told.status_code == 200, told.text
    body = told.json()
    assert body["kind"] == "error"
    [ran] = body["toolCalls"]
    assert (ran["outcome"], "42" in ran["resultJson"]) == ("succeeded", True)
    assert "would run them again" in body["error"]
    assert BUG not in told.text  # the bug's words stay in the server log
    assert (await _ran_once(api, sid))["turnId"] == body["turnId"]
    # Still a bug: logged once with its traceback.
    [logged] = [r for r in log if r.exc_info is not None]
    assert logged.getMessage().startswith("[AgentReasoner_ExecuteAsync__Exception] RuntimeError")


async def test_a_streamed_execute_ends_with_the_failed_turn(api: httpx.AsyncClient) -> None:
    sid = await _session(api)
    told = await api.post(
        "/v1/agent/execute", json={"sessionId": sid, "instruction": "go", "stream": True}
    )
    last = told.text.replace("\r\n", "\n").strip().split("\n\n")[-1]
    fields = dict(line.split(": ", 1) for line in last.splitlines() if ": " in line)
    assert fields["event"] == "turn_finished", told.text
    ended = json.loads(fields["data"])
    assert ended["kind"] == "error"
    assert [c["outcome"] for c in ended["toolCalls"]] == ["succeeded"]
    assert ended["turnId"] == (await _ran_once(api, sid))["turnId"]


async def test_chat_completions_answers_422_and_the_sdk_does_not_run_the_call_again(
    api: httpx.AsyncClient,
) -> None:
    sid = await _session(api)
    client = AsyncOpenAI(api_key="unused", base_url="http://127.0.0.1/v1", http_client=api)
    assert client.max_retries > 0  # the SDK's default: it retries a 5xx
    with pytest.raises(openai.UnprocessableEntityError) as failed:
        await client.chat.completions.create(
            model="aptix-general",
            messages=[{"role": "user", "content": "go"}],
            extra_headers={HEADER: sid},
        )
    assert failed.value.code == "internal_error"
    turn = await _ran_once(api, sid)  # one turn: the calculator ran once
    assert turn["turnId"] in failed.value.message
    assert "agent_calculator (succeeded)" in failed.value.message


async def test_a_bug_before_any_call_ran_is_still_a_500(runtime: Runtime) -> None:
    async def broken(request: LlmRequest) -> LlmResponse:
        raise RuntimeError(BUG)

    app = create_app(runtime=runtime, model=FunctionModel(broken))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as api:
        told = await api.post("/v1/agent/execute", json={"instruction": "go"})
    assert told.status_code == 500
    assert told.json()["error"]["code"] == "internal_error"
    assert BUG not in told.text
