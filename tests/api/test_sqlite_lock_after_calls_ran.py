"""A turn whose save meets another process's SQLite write lock answers after one busy timeout.

The ending's retries are for an outage that fails at once (a restarted server): a save that
failed because the lock was held has already waited the whole busy timeout, and trying it
again waited that long each time (30 s, then four more: 155 s for one request).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from aptix.api import create_app
from aptix.llm import LlmRequest, LlmResponse
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, call, reply

#: Short for the test; the served default is 30 s.
BUSY_TIMEOUT = 1.0


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, semantic_matching=False)
    async with open_runtime(settings) as opened:
        opened.database.busy_timeout = BUSY_TIMEOUT
        yield opened


@pytest.fixture
def other(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    """Another process's connection to the file, as the ``sqlite3`` shell or a backup holds it."""
    connection = sqlite3.connect(tmp_path / "aptix.db", isolation_level=None)
    yield connection
    if connection.in_transaction:
        connection.execute("ROLLBACK")
    connection.close()


@pytest.fixture
async def api(runtime: Runtime, other: sqlite3.Connection) -> AsyncIterator[httpx.AsyncClient]:
    async def calculate_then_lock(request: LlmRequest) -> LlmResponse:
        """The calculator runs; the lock is taken before the model's answer is stored."""
        if request.messages[-1].get("role") == "tool":
            other.execute("BEGIN IMMEDIATE")
            return reply("It is 42.")
        return reply(None, call("agent_calculator", {"expression": "6*7"}))

    app = create_app(runtime=runtime, model=FunctionModel(calculate_then_lock))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client


async def test_the_answer_comes_after_one_busy_timeout_not_one_per_retry(
    api: httpx.AsyncClient, other: sqlite3.Connection
) -> None:
    sid = (await api.post("/v1/sessions", json={})).json()["sessionId"]
    started = time.monotonic()
    told = await api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "go"})
    took = time.monotonic() - started
    assert told.status_code == 200, told.text
    body = told.json()
    assert body["kind"] == "error"
    assert [c["outcome"] for c in body["toolCalls"]] == ["succeeded"]
    # The failed save and one try at writing the ending; before, four retries waited more.
    assert took < 2 * BUSY_TIMEOUT + 1.0, took
    other.execute("ROLLBACK")
    # The ending kept in this process is what the session reads once the lock is gone.
    [turn] = (await api.get(f"/v1/sessions/{sid}")).json()["turns"]
    assert (turn["status"], turn["error"]["code"]) == ("error", "database_unavailable")
    assert [c["outcome"] for c in turn["toolCalls"]] == ["succeeded"]
