"""A migration that fails says why in its hint: tables that do not match the revision
recorded for them, or a role that may not change them; never "is the server running?"."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import pytest

from aptix.db.engine import (
    MIGRATE_RIGHTS_HINT,
    UNREACHABLE_HINT,
    WRITE_RIGHTS_HINT,
    open_database,
)
from aptix.db.migrate import head_revision
from aptix.errors import ConfigurationError
from tests.databases import (
    PG_ADMIN_DB,
    PG_HOST,
    PG_PORT,
    PG_USER,
    create_pg_database,
    drop_pg_database,
)

MISMATCH = (
    "the tables do not match the revision alembic_version records ({recorded}), so migrating "
    f"them to {head_revision()} failed and changed nothing: restore the whole dump, "
    "alembic_version included, into an empty database, or record there the revision the "
    "tables are at"
)


async def _run(url: str, *statements: str) -> None:
    conn = await asyncpg.connect(url.replace("+asyncpg", ""), timeout=10)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


@pytest.fixture
async def migrated() -> AsyncIterator[str]:
    """A PostgreSQL database its owner migrated to the newest revision."""
    url = await asyncio.to_thread(create_pg_database)
    try:
        await (await open_database(url)).close()
        yield url
    finally:
        await asyncio.to_thread(drop_pg_database, url)


async def _refused(url: str) -> str:
    with pytest.raises(ConfigurationError) as raised:
        await open_database(url)
    return raised.value.one_line()


async def test_tables_without_their_recorded_revision_are_named_as_the_cause(
    migrated: str,
) -> None:
    # A partial restore, or a dump taken with --exclude-table=alembic_version.
    await _run(migrated, "DELETE FROM alembic_version")
    line = await _refused(migrated)
    assert ': relation "sessions" already exists — ' in line
    assert line.endswith(MISMATCH.format(recorded="none"))
    assert UNREACHABLE_HINT not in line


async def test_tables_newer_than_their_recorded_revision_are_named_as_the_cause(
    migrated: str,
) -> None:
    await _run(migrated, "UPDATE alembic_version SET version_num = '0004_turn_leases'")
    line = await _refused(migrated)
    assert ': column "org" of relation "workflow_revisions" already exists — ' in line
    assert line.endswith(MISMATCH.format(recorded="'0004_turn_leases'"))


async def test_a_role_that_does_not_own_the_tables_is_told_to_migrate_as_their_owner(
    migrated: str,
) -> None:
    # Revision 0008 still to run (its tables dropped), by a role that may only read.
    await _run(
        migrated,
        "DROP TABLE workflow_heads",
        "UPDATE alembic_version SET version_num = '0007_session_fingerprints'",
    )
    async with _role(migrated, "SELECT") as url:
        line = await _refused(url)
    assert line.endswith(f": permission denied for schema public — {MIGRATE_RIGHTS_HINT}")


async def test_a_role_that_may_not_connect_is_told_to_get_its_rights(migrated: str) -> None:
    database = migrated.rsplit("/", 1)[-1]
    await _run(migrated, f'REVOKE CONNECT ON DATABASE "{database}" FROM PUBLIC')
    async with _role(migrated, None) as url:
        line = await _refused(url)
    assert line.endswith(f'permission denied for database "{database}" — {WRITE_RIGHTS_HINT}')


@asynccontextmanager
async def _role(url: str, grant: str | None) -> AsyncIterator[str]:
    """A login role granted ``grant`` on the tables (and CONNECT) or nothing; its URL."""
    role = f"aptix_test_{uuid.uuid4().hex[:12]}"
    database = url.rsplit("/", 1)[-1]
    admin = f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/{PG_ADMIN_DB}"
    await _run(admin, f'CREATE ROLE "{role}" LOGIN')
    try:
        if grant is not None:
            await _run(
                url,
                f'GRANT CONNECT ON DATABASE "{database}" TO "{role}"',
                f'GRANT USAGE ON SCHEMA public TO "{role}"',
                f'GRANT {grant} ON ALL TABLES IN SCHEMA public TO "{role}"',
            )
        yield url.replace(f"{PG_USER}@", f"{role}@", 1)
    finally:
        await _run(url, f'DROP OWNED BY "{role}"')  # its grants, so that it can go
        await _run(admin, f'DROP ROLE "{role}"')


async def test_a_sqlite_file_without_its_recorded_revision_is_named_as_the_cause(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'aptix.db'}"
    await (await open_database(url)).close()
    with sqlite3.connect(tmp_path / "aptix.db") as conn:
        conn.execute("DELETE FROM alembic_version")
    line = await _refused(url)
    assert ": table sessions already exists — " in line
    assert line.endswith(MISMATCH.format(recorded="none"))
