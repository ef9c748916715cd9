"""A process whose database connections died decides on the workflows as stored.

After a PostgreSQL restart, a failover or ``pg_terminate_backend``, every pooled connection is
dead. The first statement a process sends meets one, and that statement is usually the
workflow check. The check used to stamp its time before the read, log the failure and go on:
that request, and the check before its tool call (skipped as "recent"), decided on the copy
from before, so a workflow disabled seconds earlier on another process could be started and
one published there answered 404 (review r3 F1, round 67).

Now the check reads again at once after a disconnect (the pool was renewed by it), a failed
read never counts as a check, and a call in a session is decided on a copy read within one
interval or not at all: 503 ``database_unavailable`` over HTTP, never a start on a stale copy.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy import exc as sa

from aptix.api import create_app
from aptix.db.outage import DATABASE_UNAVAILABLE, mark_from_aptix_database
from aptix.llm import LlmClient, LlmRequest, LlmResponse
from aptix.reasoner.call_states import NOT_STARTED
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, call, reply
from aptix.tools.context import context_for
from aptix.workflows.registry import WorkflowRegistry
from aptix.workflows.store import InMemoryWorkflowStore
from aptix.workflows.sync import SYNC_INTERVAL, WorkflowSync
from tests.databases import (
    PG_ADMIN_DB,
    PG_HOST,
    PG_PORT,
    PG_USER,
    create_pg_database,
    drop_pg_database,
)
from tests.workflows.conftest import KNOWN_TOOLS

FIELDS = {
    "userIntentPatterns": ["run the risky flow"],
    "instructionText": "Greet people.",
    "permittedTools": ["agent_hello_world"],
    "completionCriteria": ["Greeted."],
}
START = {"operation": "start_workflow", "workflowId": "risky"}
RUN = "/v1/tools/agent_workflow_run/invoke"
DISABLED = "Workflow 'risky' is disabled and cannot be run."
ORG = "local"  # the caller of an app without API keys


@pytest.fixture
def own_pg() -> Iterator[str]:
    """A database of this test's own: its connections are the ones terminated."""
    url = create_pg_database()
    yield url
    drop_pg_database(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Each test twice, on an empty database: every test here publishes the same workflow."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'aptix.db'}"
    else:
        yield request.getfixturevalue("own_pg")


async def _terminate_connections(url: str) -> None:
    """What a PostgreSQL restart or failover does to each pooled connection to ``url``."""
    name = url.rsplit("/", 1)[-1]
    admin = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_ADMIN_DB)
    try:
        others = "FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()"
        assert await admin.fetchval(f"SELECT count(pg_terminate_backend(pid)) {others}", name)
        for _ in range(100):  # gone, and each runtime's socket closed, before the test goes on
            if not await admin.fetchval(f"SELECT count(*) {others}", name):
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.1)
    finally:
        await admin.close()


@asynccontextmanager
async def _two_processes(tmp_path: Path, url: str) -> AsyncIterator[tuple[Runtime, Runtime]]:
    settings = AptixSettings(
        data_dir=tmp_path, database_url=url, load_plugins=False, semantic_matching=False
    )
    async with open_runtime(settings) as a, open_runtime(settings) as b:
        yield a, b


@asynccontextmanager
async def _api(
    runtime: Runtime, model: LlmClient | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(runtime=runtime, model=model))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client


async def _draft(runtime: Runtime) -> None:
    authoring = runtime.workflows.authoring
    assert (await authoring.draft("risky", "Risky", "Greets.", "root", ORG)).ok
    assert (await authoring.update("risky", FIELDS, "root", ORG)).ok


async def _publish(runtime: Runtime) -> None:
    await _draft(runtime)
    assert (await runtime.workflows.authoring.publish("risky", "root", ORG)).ok


async def _disable(runtime: Runtime) -> None:
    disabled = await runtime.workflows.authoring.update(
        "risky", {"status": "disabled"}, "root", ORG
    )
    assert disabled.ok, disabled


async def _active(api: httpx.AsyncClient, session_id: str) -> Any:
    return (await api.get(f"/v1/sessions/{session_id}")).json()["activeWorkflowId"]


async def test_a_start_after_the_connections_died_is_refused_for_a_workflow_disabled_elsewhere(
    tmp_path: Path, own_pg: str
) -> None:
    async with _two_processes(tmp_path, own_pg) as (a, b), _api(b) as api:
        await _publish(a)
        await asyncio.sleep(SYNC_INTERVAL)  # B's copy is as fresh as one interval promises
        session_id = (await api.post("/v1/sessions", json={})).json()["sessionId"]
        assert (await api.get("/v1/workflows/risky")).status_code == 200  # B serves it
        await _disable(a)
        await asyncio.sleep(SYNC_INTERVAL)  # B idle: its next request checks again
        await _terminate_connections(own_pg)
        started = await api.post(RUN, json={"sessionId": session_id, "arguments": START})
        assert started.status_code == 200, started.text
        assert started.json()["successful"] is False, started.text
        assert started.json()["errors"][0]["message"] == DISABLED
        assert await _active(api, session_id) is None


async def test_a_read_after_the_connections_died_serves_what_another_process_published(
    tmp_path: Path, own_pg: str
) -> None:
    async with _two_processes(tmp_path, own_pg) as (a, b), _api(b) as api:
        assert (await api.get("/v1/workflows/risky")).status_code == 404
        await _publish(a)
        await asyncio.sleep(SYNC_INTERVAL)
        await _terminate_connections(own_pg)
        seen = await api.get("/v1/workflows/risky")
    assert seen.status_code == 200, seen.text
    assert seen.json()["workflow"]["status"] == "published"


async def test_a_call_after_the_connections_died_decides_on_what_another_process_stored(
    tmp_path: Path, own_pg: str
) -> None:
    """No request boundary: the executor's own check before the call meets the dead pool."""
    async with _two_processes(tmp_path, own_pg) as (a, b):
        await _publish(a)
        await b.workflows.refresh()
        created = await b.services.sessions.create_session(org=ORG, user="ann")
        assert created.result is not None
        context = context_for(created.result, org=ORG, user="ann", role="user")
        await _disable(a)
        await asyncio.sleep(SYNC_INTERVAL)
        await _terminate_connections(own_pg)
        started = await b.executor.invoke("agent_workflow_run", json.dumps(START), context)
        session = await b.services.sessions.get_session(created.result.id, ORG)
    assert not started.successful, started
    assert started.errors[0].message == DISABLED
    assert session is not None
    assert session.active_workflow_id is None


def _outage() -> sa.OperationalError:
    error = sa.OperationalError("SELECT counter", None, ConnectionRefusedError("down"))
    mark_from_aptix_database(error)
    return error


async def test_a_start_that_cannot_confirm_the_workflows_answers_503_instead_of_deciding(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The counter cannot be read (the database went away after the session was read)."""
    async with _two_processes(tmp_path, database_url) as (a, b), _api(b) as api:
        await _publish(a)
        await b.workflows.refresh()
        session_id = (await api.post("/v1/sessions", json={})).json()["sessionId"]
        await _disable(a)
        await asyncio.sleep(SYNC_INTERVAL)

        async def unreadable() -> int:
            raise _outage()

        monkeypatch.setattr(b.workflows.store, "change_marker", unreadable)
        started = await api.post(RUN, json={"sessionId": session_id, "arguments": START})
        assert started.status_code == 503, started.text
        assert started.json()["error"]["code"] == "database_unavailable"
        assert started.headers["Retry-After"] == "5"
        # In a model turn the call fails as not run, with the same words; nothing started.
        session = await b.services.sessions.get_session(session_id, ORG)
        assert session is not None
        context = context_for(session, org=ORG, user="local", role="admin")
        call = await b.executor.invoke("agent_workflow_run", json.dumps(START), context)
        assert call.errors[0].message == DATABASE_UNAVAILABLE
        assert await _active(api, session_id) is None
        # Without a session nothing is decided on the workflows: the calculator still answers.
        sum_ = await api.post(
            "/v1/tools/agent_calculator/invoke", json={"arguments": {"expression": "1+1"}}
        )
        assert sum_.status_code == 200, sum_.text


async def test_a_turn_that_cannot_confirm_the_workflows_starts_nothing(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The counter goes unreadable while the model thinks: the turn ends before the start runs."""
    async with _two_processes(tmp_path, database_url) as (a, b):

        async def unreadable() -> int:
            raise _outage()

        async def disabled_meanwhile(_request: LlmRequest) -> LlmResponse:
            await _disable(a)
            await asyncio.sleep(SYNC_INTERVAL)
            monkeypatch.setattr(b.workflows.store, "change_marker", unreadable)
            return reply(None, call("agent_workflow_run", START, id="c1"))

        await _publish(a)
        await b.workflows.refresh()
        async with _api(b, FunctionModel(disabled_meanwhile)) as api:
            session_id = (await api.post("/v1/sessions", json={})).json()["sessionId"]
            told = await api.post(
                "/v1/agent/execute", json={"sessionId": session_id, "instruction": "go"}
            )
            shown = (await api.get(f"/v1/sessions/{session_id}")).json()
    assert told.status_code == 503, told.text
    assert told.json()["error"]["code"] == "database_unavailable"
    assert shown["activeWorkflowId"] is None
    (turn,) = shown["turns"]
    assert turn["error"]["code"] == "database_unavailable", turn
    (started,) = turn["toolCalls"]
    assert (started["outcome"], started["wasExecuted"]) == ("failed", False), started
    assert started["errorMessage"] == NOT_STARTED


class _FlakyStore(InMemoryWorkflowStore):
    """An in-memory store whose counter read fails as told, then answers."""

    def __init__(self, *failures: BaseException) -> None:
        super().__init__()
        self.failures = list(failures)
        self.reads = 0

    async def change_marker(self) -> int:
        self.reads += 1
        if self.failures:
            raise self.failures.pop(0)
        return await super().change_marker()


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _registry() -> WorkflowRegistry:
    return WorkflowRegistry(known_tools=KNOWN_TOOLS)


def _dead_connection() -> sa.DBAPIError:
    closed = Exception("cannot call PreparedStatement.fetch(): the underlying connection is closed")
    return sa.InterfaceError("SELECT counter", None, closed, connection_invalidated=True)


async def _published_in(store: InMemoryWorkflowStore) -> None:
    from aptix.workflows.authoring import WorkflowAuthoring

    authoring = WorkflowAuthoring(store, _registry())
    assert (await authoring.draft("risky", "Risky", "Greets.", "root", ORG)).ok
    assert (await authoring.update("risky", FIELDS, "root", ORG)).ok
    assert (await authoring.publish("risky", "root", ORG)).ok


async def test_a_check_that_meets_a_dead_connection_reads_again_at_once() -> None:
    store = _FlakyStore(_dead_connection())
    registry = _registry()
    sync = WorkflowSync(store, registry, clock=_Clock())
    await _published_in(store)
    assert await sync.check() is True
    assert store.reads == 3  # the dead one, the second try, and the load's own read
    assert registry.get("risky", ORG) is not None


async def test_a_failed_check_is_no_check_for_a_decision(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = _Clock()
    store = _FlakyStore(ConnectionRefusedError("down"), ConnectionRefusedError("down"))
    registry = _registry()
    sync = WorkflowSync(store, registry, clock=clock)
    await _published_in(store)
    with caplog.at_level("WARNING", logger="aptix.workflows"):
        assert await sync.check() is False  # a request that needs no decision goes on
        assert await sync.check() is False  # and the next ones do not each wait
        assert store.reads == 1
        with pytest.raises(ConnectionRefusedError):
            await sync.confirm()  # a decision reads again, and refuses to guess
        assert store.reads == 2
        assert registry.get("risky", ORG) is None
        assert await sync.confirm() is True  # the database is back: read at once
        assert registry.get("risky", ORG) is not None
        assert await sync.confirm() is False  # and now fresh for one interval
        assert store.reads == 4
        clock.now += SYNC_INTERVAL
        assert await sync.confirm() is False
        assert store.reads == 5
    assert [r.getMessage() for r in caplog.records] == [
        "Could not check for workflow changes: down"
    ]
