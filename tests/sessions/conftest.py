from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from aptix.db.engine import Database, open_database
from aptix.modes.catalog import YamlModeCatalog, load_mode_catalog
from aptix.sessions.sql import SqlSessionManager
from aptix.sessions.tables import ModeHistoryRow, SessionRow


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    db = await open_database(database_url)
    async with db.transaction() as tx:  # the PostgreSQL database is shared by the session
        for table in (ModeHistoryRow.__table__, SessionRow.__table__):
            await tx.execute(table.delete())
    yield db
    await db.close()


@pytest.fixture
def modes() -> YamlModeCatalog:
    return load_mode_catalog()


@pytest.fixture
def manager(database: Database, modes: YamlModeCatalog) -> SqlSessionManager:
    return SqlSessionManager(database, modes)
