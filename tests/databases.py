"""Real databases for tests: a SQLite file, or a throwaway PostgreSQL database.

PostgreSQL is never skipped: when it cannot be reached the tests that need it fail, saying
how to start it.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from aptix.settings import AptixSettings

PG_HOST = os.environ.get("APTIX_TEST_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("APTIX_TEST_PG_PORT", "5432"))
PG_USER = os.environ.get("APTIX_TEST_PG_USER", "postgres")
PG_ADMIN_DB = os.environ.get("APTIX_TEST_PG_ADMIN_DB", "postgres")


async def pg_admin(*statements: str) -> None:
    """Run ``statements`` as the administrator, on the server's maintenance database."""
    try:
        conn = await asyncpg.connect(
            host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_ADMIN_DB, timeout=10
        )
    except (OSError, asyncpg.PostgresError) as exc:
        raise RuntimeError(
            f"PostgreSQL at {PG_HOST}:{PG_PORT} is not reachable ({exc}). Start it with "
            "`pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`."
        ) from exc
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


def create_pg_database() -> str:
    """Create an empty, uniquely named database and return its SQLAlchemy URL."""
    name = f"aptix_test_{uuid.uuid4().hex[:12]}"
    asyncio.run(pg_admin(f'CREATE DATABASE "{name}"'))
    return f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"


def drop_pg_database(url: str) -> None:
    """Drop a database made by :func:`create_pg_database`."""
    name = url.rsplit("/", 1)[-1]
    asyncio.run(pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A throwaway PostgreSQL database for the importing module's tests, dropped after."""
    url = create_pg_database()
    yield url
    drop_pg_database(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each test twice: on a fresh SQLite file and on the PostgreSQL database of ``pg_url``."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'aptix.db'}"
    url: str = request.getfixturevalue("pg_url")
    return url


def on_both_databases(tmp_path: Path, database_url: str) -> AptixSettings:
    """Settings for each test twice, as ``database_url`` gives it: no plugins.

    A module takes it as its ``settings``: ``settings = pytest.fixture(on_both_databases,
    name="settings")``.
    """
    return AptixSettings(data_dir=tmp_path, database_url=database_url, load_plugins=False)
