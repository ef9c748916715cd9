"""A turn the database fails after its calls ran is answered as a failed turn, not "retry".

A 503 ``database_unavailable`` with ``Retry-After`` tells a client to send the request again,
and the ``openai`` SDK does so by itself: the new turn would run the tools again. Once a call
of the request may have run, ``/v1/agent/execute`` answers the turn as it ended (``kind:
"error"``, its calls with their outcomes) and ``/v1/chat/completions`` a 422 the SDK does not
retry; a 503 is left for a turn that ran nothing (review r2 F1, F4, round 68).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI
from sqlalchemy import exc as sa

from aptix.api import create_app
from aptix.db.outage import DatabaseRefused
from aptix.llm import LlmRequest, LlmResponse
from aptix.reasoner import call_states, endings
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, call, reply
from tests.logs import records_of

READ_ONLY = "cannot execute UPDATE in a read-only transaction"
HEADER = "X-Aptix-Session"


def _outage() -> Exception:
    """What a checkpoint meets on a pooled connection a PostgreSQL restart closed."""
    closed = Exception("the underlying connection is closed")
    return sa.InterfaceError("UPDATE turns", None, closed, connection_invalidated=True)


def _refused() -> Exception:
    """What a checkpoint meets once the database takes no writes."""
    return DatabaseRefused(READ_ONLY)


@pytest.fixture(autouse=True)
def _quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(endings, "SAVE_RETRY_SECONDS", (0.0, 0.0, 0.0))


@pytest.fixture
async def runtime(database_url: str, tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = AptixSettings(data_dir=tmp_path, database_url=database_url, load_plugins=False)
    async with open_runtime(settings) as opened:
        yield opened


async def _calculate(request: LlmRequest) -> LlmResponse:
    """Each new instruction calls the calculator once; its result is the answer."""
    last = request.messages[-1]
    if last.get("role") == "tool":
        return reply(f"It is {last['content']}.")
    return reply(None, call("agent_calculator", {"expression": "6*7"}))


@pytest.fixture
async def api(runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(runtime=runtime, model=FunctionModel(_calculate))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client


def _fail_writes(
    runtime: Runtime,
    monkeypatch: pytest.MonkeyPatch,
    error: Callable[[], Exception],
    *,
    after: str,
    times: int,
) -> None:
    """The next ``times`` writes of a turn holding a call in state ``after`` raise ``error()``."""
    store = runtime.turns
    save, settle = store.save, store.settle
    left = [times]

    def fail(record: Any) -> None:
        if left[0] > 0 and any(e["state"] == after for e in record.tool_calls):
            left[0] -= 1
            raise error()

    async def failing_save(record: Any) -> Any:
        fail(record)
        return await save(record)

    async def failing_settle(record: Any) -> Any:
        fail(record)
        return await settle(record)

    monkeypatch.setattr(store, "save", failing_save)
    monkeypatch.setattr(store, "settle", failing_settle)


async def _session(api: httpx.AsyncClient) -> str:
    return str((await api.post("/v1/sessions", json={})).json()["sessionId"])


async def _turns(api: httpx.AsyncClient, session_id: str) -> list[dict[str, Any]]:
    return list((await api.get(f"/v1/sessions/{session_id}")).json()["turns"])


def _ran_once(turns: list[dict[str, Any]]) -> dict[str, Any]:
    """The one turn of the session, which ran the calculator once, as recorded."""
    [turn] = turns
    [ran] = turn["toolCalls"]
    assert (ran["name"], ran["outcome"], ran["wasExecuted"]) == (
        "agent_calculator",
        "succeeded",
        True,
    )
    assert turn["status"] == "error", turn
    return turn


def _events(stream: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for block in stream.replace("\r\n", "\n").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            events.append((fields["event"], json.loads(fields["data"])))
    return events


@pytest.mark.parametrize(
    ("error", "code"), [(_outage, "database_unavailable"), (_refused, "database_refused")]
)
async def test_execute_answers_the_failed_turn_with_the_call_that_ran(
    runtime: Runtime,
    api: httpx.AsyncClient,
    monkeypatch: pytest.MonkeyPatch,
    error: Callable[[], Exception],
    code: str,
) -> None:
    # The checkpoint after the call fails, and the ending's first try: the second lands.
    _fail_writes(runtime, monkeypatch, error, after="succeeded", times=2)
    sid = await _session(api)
    told = await api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "go"})
    assert told.status_code == 200, told.text
    assert "Retry-After" not in told.headers
    body = told.json()
    assert body["kind"] == "error"
    [ran] = body["toolCalls"]
    assert (ran["outcome"], ran["wasExecuted"]) == ("succeeded", True)
    assert "42" in ran["resultJson"]
    assert "would run them again" in body["error"]
    turn = _ran_once(await _turns(api, sid))
    assert turn["turnId"] == body["turnId"]
    assert turn["error"]["code"] == code
    assert turn["error"]["message"] == body["error"]


async def test_a_streamed_execute_ends_with_the_failed_turn_not_an_error_envelope(
    runtime: Runtime, api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fail_writes(runtime, monkeypatch, _outage, after="succeeded", times=2)
    sid = await _session(api)
    told = await api.post(
        "/v1/agent/execute", json={"sessionId": sid, "instruction": "go", "stream": True}
    )
    kind, last = _events(told.text)[-1]
    assert kind == "turn_finished"
    assert last["kind"] == "error", last
    assert [c["outcome"] for c in last["toolCalls"]] == ["succeeded"]
    assert last["turnId"] == _ran_once(await _turns(api, sid))["turnId"]


async def test_chat_completions_answers_422_naming_the_turn_and_the_sdk_does_not_retry(
    runtime: Runtime, api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fail_writes(runtime, monkeypatch, _outage, after="succeeded", times=2)
    sid = await _session(api)
    client = AsyncOpenAI(api_key="unused", base_url="http://127.0.0.1/v1", http_client=api)
    assert client.max_retries > 0  # the SDK's default: it retries a 5xx
    with pytest.raises(openai.UnprocessableEntityError) as failed:
        await client.chat.completions.create(
            model="aptix-general",
            messages=[{"role": "user", "content": "go"}],
            extra_headers={HEADER: sid},
        )
    answer = failed.value.response
    assert answer.headers[HEADER] == sid
    assert "Retry-After" not in answer.headers
    assert failed.value.code == "database_unavailable"
    turn = _ran_once(await _turns(api, sid))  # one turn: the calculator ran once
    assert turn["turnId"] in failed.value.message
    assert "agent_calculator (succeeded)" in failed.value.message


async def test_a_streamed_completion_ends_with_the_422_error(
    runtime: Runtime, api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fail_writes(runtime, monkeypatch, _outage, after="succeeded", times=2)
    sid = await _session(api)
    told = await api.post(
        "/v1/chat/completions",
        headers={HEADER: sid},
        json={
            "model": "aptix-general",
            "messages": [{"role": "user", "content": "go"}],
            "stream": True,
        },
    )
    chunks = [
        json.loads(line[6:])
        for line in told.text.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]
    error = chunks[-1]["error"]
    assert (error["code"], error["type"]) == ("database_unavailable", "invalid_request_error")
    _ran_once(await _turns(api, sid))


async def test_a_turn_whose_calls_never_started_still_answers_503_and_records_them_not_run(
    runtime: Runtime, api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The checkpoint that puts the call on record as started fails: the call never runs.
    _fail_writes(runtime, monkeypatch, _outage, after="started", times=1)
    sid = await _session(api)
    told = await api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "go"})
    assert told.status_code == 503, told.text
    assert told.json()["error"]["code"] == "database_unavailable"
    assert told.headers["Retry-After"] == "5"
    [turn] = await _turns(api, sid)
    [call_] = turn["toolCalls"]
    assert (call_["outcome"], call_["wasExecuted"]) == ("failed", False), call_
    assert call_["errorMessage"] == call_states.NOT_STARTED


@pytest.fixture
def log() -> Iterator[list[logging.LogRecord]]:
    with records_of("aptix") as records:
        yield records


async def test_turns_an_outage_ends_are_logged_once_without_a_traceback(
    runtime: Runtime,
    api: httpx.AsyncClient,
    monkeypatch: pytest.MonkeyPatch,
    log: list[logging.LogRecord],
) -> None:
    sid = await _session(api)
    for _ in range(2):
        _fail_writes(runtime, monkeypatch, _outage, after="succeeded", times=2)
        await api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "go"})
    shown = [r for r in log if r.levelno >= logging.WARNING]
    assert [r.exc_info for r in shown] == [None]
    [line] = shown
    assert line.getMessage().startswith("[AgentReasoner_Database__Unavailable] ")
    assert "InterfaceError" in line.getMessage()


async def test_a_bug_ending_a_turn_is_still_logged_with_its_traceback(
    runtime: Runtime, log: list[logging.LogRecord]
) -> None:
    async def broken(request: LlmRequest) -> LlmResponse:
        raise RuntimeError("a bug")

    transport = httpx.ASGITransport(app=create_app(runtime=runtime, model=FunctionModel(broken)))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as api:
        told = await api.post("/v1/agent/execute", json={"instruction": "go"})
    assert told.status_code == 500
    [logged] = [r for r in log if r.exc_info is not None]
    assert logged.getMessage().startswith("[AgentReasoner_ExecuteAsync__Exception] RuntimeError")
