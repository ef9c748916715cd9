"""``Database.run_one``: one statement, committed on its own; ``run`` stays one transaction."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import Connection, text

from aptix.db.engine import Database, open_database


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    db = await open_database(database_url, migrate=False)
    await db.run(lambda tx: tx.execute(text("DROP TABLE IF EXISTS notes")))
    await db.run(lambda tx: tx.execute(text("CREATE TABLE notes (body text NOT NULL)")))
    yield db
    await db.close()


def _insert(body: str) -> object:
    return lambda tx: tx.execute(text("INSERT INTO notes VALUES (:body)"), {"body": body})


async def _bodies(url: str) -> list[str]:
    """What another connection (a fresh engine) sees: only committed rows."""
    other = await open_database(url, migrate=False)
    try:
        rows = await other.run(lambda tx: tx.execute(text("SELECT body FROM notes")).all())
        return sorted(row.body for row in rows)
    finally:
        await other.close()


async def test_a_statement_is_committed_when_run_one_returns(
    database: Database, database_url: str
) -> None:
    def changed(tx: Connection) -> int:
        return int(tx.execute(text("UPDATE notes SET body = 'b' WHERE body = 'a'")).rowcount)

    await database.run_one(_insert("a"))
    assert await database.run_one(changed) == 1
    assert await _bodies(database_url) == ["b"]


# On SQLite run_one is run, one transaction as ever: this is about PostgreSQL alone.
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_on_postgresql_the_statement_is_its_own_transaction(
    database: Database,
) -> None:
    assert not database.is_sqlite
    # VACUUM refuses to run inside a transaction block: it runs only if no BEGIN was sent.
    vacuum = text("VACUUM notes")
    await database.run_one(lambda tx: tx.execute(vacuum))
    with pytest.raises(Exception, match="cannot run inside a transaction block"):
        await database.run(lambda tx: tx.execute(vacuum))


async def test_run_after_run_one_still_rolls_back_as_a_whole(
    database: Database, database_url: str
) -> None:
    await database.run_one(_insert("kept"))

    def fails(tx: Connection) -> None:
        tx.execute(text("INSERT INTO notes VALUES ('lost')"))
        tx.execute(text("INSERT INTO notes VALUES (NULL)"))  # NOT NULL: the transaction fails

    with pytest.raises(Exception):  # noqa: B017, PT011 - the driver's integrity error
        await database.run(fails)
    with pytest.raises(Exception):  # noqa: B017, PT011
        await database.run_one(lambda tx: tx.execute(text("INSERT INTO notes VALUES (NULL)")))
    assert await _bodies(database_url) == ["kept"]
