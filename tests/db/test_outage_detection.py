"""PostgreSQL refusing a session with an error is an outage: 503, never a 500."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import pytest
from sqlalchemy import exc as sa
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from aptix.api import create_app
from aptix.db.outage import is_database_outage
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import ScriptedModel, reply
from tests.databases import (
    PG_USER,
    create_pg_database,
    drop_pg_database,
    pg_admin,
)


def _name(url: str) -> str:
    return url.rsplit("/", 1)[-1]


async def _refusal(url: str) -> BaseException:
    """What SQLAlchemy raises when ``url`` refuses a new connection."""
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
    except Exception as exc:
        return exc
    finally:
        await engine.dispose()
    raise AssertionError("the connection was accepted")


@pytest.fixture
async def pg_database() -> AsyncIterator[str]:
    url = await asyncio.to_thread(create_pg_database)
    try:
        yield url
    finally:
        await pg_admin(f'ALTER DATABASE "{_name(url)}" ALLOW_CONNECTIONS true')
        await asyncio.to_thread(drop_pg_database, url)


async def test_a_database_not_accepting_connections_is_an_outage(pg_database: str) -> None:
    await pg_admin(f'ALTER DATABASE "{_name(pg_database)}" ALLOW_CONNECTIONS false')
    refused = await _refusal(pg_database)
    # SQLAlchemy's wrapper, not the asyncpg error: the chain must be read.
    assert isinstance(refused, sa.DBAPIError)
    assert not isinstance(refused, asyncpg.PostgresError)
    assert is_database_outage(refused)


async def test_a_role_out_of_connection_slots_is_an_outage(pg_database: str) -> None:
    role = f"aptix_test_{uuid.uuid4().hex[:12]}"
    await pg_admin(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT 0')
    try:
        url = pg_database.replace(f"{PG_USER}@", f"{role}@", 1)
        refused = await _refusal(url)
    finally:
        await pg_admin(f'DROP ROLE "{role}"')
    assert "too many connections" in str(refused)
    assert is_database_outage(refused)


@pytest.mark.parametrize(
    "driver_error",
    [
        asyncpg.CannotConnectNowError("the database system is shutting down"),
        asyncpg.CannotConnectNowError("the database system is starting up"),
        asyncpg.AdminShutdownError("terminating connection due to administrator command"),
        asyncpg.TooManyConnectionsError("sorry, too many clients already"),
    ],
)
def test_server_errors_wrapped_as_sqlalchemy_raises_them_are_an_outage(
    driver_error: Exception,
) -> None:
    # SQLAlchemy's asyncpg adapter raises its own error from asyncpg's, then wraps that.
    adapted = RuntimeError(str(driver_error))
    adapted.__cause__ = driver_error
    wrapped = sa.DBAPIError("SELECT 1", None, adapted)  # type: ignore[arg-type]
    wrapped.__cause__ = adapted
    assert is_database_outage(wrapped)


async def test_a_statement_failing_with_a_prerequisite_error_is_no_outage(
    pg_database: str,
) -> None:
    # 55000, as a database refusing connections answers, but raised by a statement.
    engine = create_async_engine(pg_database)
    try:
        async with engine.connect() as conn:
            await conn.execute(text("CREATE SEQUENCE s"))
            with pytest.raises(sa.DBAPIError) as raised:
                await conn.execute(text("SELECT currval('s')"))
    finally:
        await engine.dispose()
    assert isinstance(raised.value.orig.__cause__, asyncpg.ObjectNotInPrerequisiteStateError)
    assert not is_database_outage(raised.value)


async def test_routes_answer_503_while_postgresql_refuses_connections(
    pg_database: str, tmp_path: Path
) -> None:
    settings = AptixSettings(
        data_dir=tmp_path, database_url=pg_database, load_plugins=False, semantic_matching=False
    )
    model = ScriptedModel([reply("hello")])
    async with open_runtime(settings) as runtime:
        app = create_app(runtime=runtime, model=model)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
        ) as client:
            first = await client.post("/v1/agent/execute", json={"instruction": "hi"})
            assert first.status_code == 200, first.text
            session = first.json()["sessionId"]

            name = _name(pg_database)
            await pg_admin(
                f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false',
                f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'",
            )
            answers = [
                await client.get("/v1/sessions"),
                await client.get(f"/v1/sessions/{session}"),
                await client.post(
                    "/v1/agent/execute", json={"sessionId": session, "instruction": "again"}
                ),
                await client.get("/healthz"),
            ]
            for answer in answers:
                assert answer.status_code == 503, (answer.request.url, answer.text)
                assert answer.json()["error"]["code"] == "database_unavailable"
                assert int(answer.headers["retry-after"]) > 0

            await pg_admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
            back = await client.get(f"/v1/sessions/{session}")
            assert back.status_code == 200, back.text
