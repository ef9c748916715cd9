"""A SQLite unit of work waits one busy timeout for the write lock, its place in the queue included.

Another process holds the lock for real (``BEGIN IMMEDIATE`` on a second connection).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.exc import OperationalError

from aptix.db.engine import Database, failure_hint, open_database
from aptix.db.outage import database_error_code, from_aptix_database

BUSY_TIMEOUT = 1.0


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    db = await open_database(f"sqlite+aiosqlite:///{tmp_path / 'aptix.db'}", migrate=False)
    await db.run(lambda tx: tx.execute(text("CREATE TABLE notes (body text NOT NULL)")))
    db.busy_timeout = BUSY_TIMEOUT
    yield db
    await db.close()


def _insert(tx: Connection) -> None:
    tx.execute(text("INSERT INTO notes VALUES ('x')"))


async def _in_a_transaction(database: Database) -> None:
    async with database.transaction() as session:
        await session.execute(text("INSERT INTO notes VALUES ('y')"))


def _count(tx: Connection) -> int:
    return int(tx.execute(text("SELECT count(*) FROM notes")).scalar_one())


async def _outcome(unit: asyncio.Future[object]) -> tuple[BaseException | None, float]:
    started = time.monotonic()
    try:
        await unit
    except Exception as exc:
        return exc, time.monotonic() - started
    return None, time.monotonic() - started


async def test_each_queued_unit_gives_up_at_its_own_busy_timeout(
    database: Database, tmp_path: Path
) -> None:
    other = sqlite3.connect(tmp_path / "aptix.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        units: list[asyncio.Future[object]] = [
            asyncio.ensure_future(database.run(_insert)) for _ in range(4)
        ]
        units.append(asyncio.ensure_future(_in_a_transaction(database)))
        outcomes = await asyncio.wait_for(
            asyncio.gather(*(_outcome(unit) for unit in units)), timeout=4 * BUSY_TIMEOUT
        )
        for failed, took in outcomes:
            assert isinstance(failed, OperationalError), failed
            assert "database is locked" in str(failed)
            assert database_error_code(failed) == "database_unavailable"  # 503, Retry-After
            assert from_aptix_database(failed)
            assert "another process holds the SQLite file's write lock" in failure_hint(
                "sqlite+aiosqlite:///aptix.db", failed
            )
            assert took < BUSY_TIMEOUT + 0.75, took
        # A read of one statement waits for no writer meanwhile, nor does the health check.
        assert await database.read_one(_count) == 0
        await asyncio.wait_for(database.ping(), timeout=BUSY_TIMEOUT / 2)
    finally:
        other.execute("ROLLBACK")
        other.close()
    await database.run(_insert)  # the lock released, the next unit goes through
    assert await database.read_one(_count) == 1
