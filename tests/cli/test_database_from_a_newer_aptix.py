"""A database a newer Aptix migrated (a revision this one does not ship) is one line, everywhere.

The database is stamped as a newer Aptix leaves it: ``alembic_version`` names a revision this
version has no script for. ``aptix serve``, ``aptix db upgrade`` and the other commands end
with the configuration error's one line and exit code 2, never alembic's traceback.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from aptix.db.engine import open_database
from aptix.db.migrate import current_revision, upgrade_to_head
from tests.databases import create_pg_database, drop_pg_database
from tests.environment import run_aptix

FUTURE = "0099_from_a_newer_aptix"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL database of this test's own: the stamp would stop every later test."""
    url = create_pg_database()
    yield url
    drop_pg_database(url)


async def _stamp_future(url: str) -> None:
    database = await open_database(url, migrate=False)
    try:
        if await current_revision(database.engine) != FUTURE:
            await upgrade_to_head(database.engine)
        async with database.transaction() as session:
            await session.execute(
                text("UPDATE alembic_version SET version_num = :v"), {"v": FUTURE}
            )
    finally:
        await database.close()


@pytest.mark.parametrize(
    "command",
    [["serve", "--port", "0"], ["db", "upgrade"], ["sessions", "list"], ["workflows", "list"]],
    ids=["serve", "db-upgrade", "sessions-list", "workflows-list"],
)
def test_a_database_from_a_newer_aptix_is_one_line(
    command: list[str],
    database_url: str,
    tmp_path: Path,
) -> None:
    asyncio.run(_stamp_future(database_url))
    done = run_aptix(
        command,
        tmp_path,
        APTIX_DATA_DIR=str(tmp_path),
        APTIX_DATABASE_URL=database_url,
        APTIX_SEMANTIC_MATCHING="false",
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: The database is at revision '{FUTURE}'"), lines[0]
    assert "a newer Aptix wrote it" in lines[0]
    assert "upgrade Aptix" in lines[0]
    assert done.stdout == ""
