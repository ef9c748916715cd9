from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import inspect

from aptix.db.engine import open_database
from aptix.db.migrate import current_revision, head_revision
from tests.databases import create_pg_database, drop_pg_database


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'nested' / 'dir' / 'fresh.db'}"
        return
    url = create_pg_database()
    yield url
    drop_pg_database(url)


async def test_upgrade_from_empty_to_head(empty_database_url: str) -> None:
    unmigrated = await open_database(empty_database_url, migrate=False)
    assert await current_revision(unmigrated.engine) is None
    await unmigrated.close()

    database = await open_database(empty_database_url)
    try:
        assert await current_revision(database.engine) == head_revision()
        async with database.engine.connect() as conn:
            tables = await conn.run_sync(lambda sync: set(inspect(sync).get_table_names()))
        assert {"sessions", "session_mode_history", "alembic_version"} <= tables
    finally:
        await database.close()
    # Opening again is a no-op: already at head.
    again = await open_database(empty_database_url)
    assert await current_revision(again.engine) == head_revision()
    await again.close()
