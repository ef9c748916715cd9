"""The SQL workflow store on SQLite and on a real PostgreSQL (a database of its own per run)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from aptix.db.engine import Database, open_database
from aptix.workflows.sql_store import SqlWorkflowStore
from aptix.workflows.store import RevisionAction, current_draft, served_revision
from tests.workflows.conftest import make_manifest

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


@pytest.fixture(params=["sqlite", "postgresql"])
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    if request.param == "sqlite":
        db = await open_database(f"sqlite+aiosqlite:///{tmp_path / 'aptix.db'}")
        yield db
        await db.close()
        return
    # A missing server fails the test: it is never skipped.
    name = f"aptix_test_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(PG_ADMIN)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    db = await open_database(f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}")
    try:
        yield db
    finally:
        await db.close()
        admin = await asyncpg.connect(PG_ADMIN)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


async def test_revisions_are_numbered_and_read_back(database: Database) -> None:
    store = SqlWorkflowStore(database)
    draft = make_manifest("trip", status="draft", version="0.1.0", notes=["ünïcode ✓"])
    first = await store.append(draft, RevisionAction.DRAFT, "ann", "acme")
    published = make_manifest("trip", version="0.1.0")
    second = await store.append(published, RevisionAction.PUBLISH, None, "acme")
    await store.append(make_manifest("other"), RevisionAction.PUBLISH, "bob", "acme")
    # Another org's workflow of the same id is its own, numbered from 1.
    theirs = await store.append(make_manifest("trip"), RevisionAction.DRAFT, "eve", "globex")

    assert (first.revision, second.revision, theirs.revision) == (1, 2, 1)
    history = await store.history("trip", "acme")
    assert [h.revision for h in history] == [1, 2]
    assert history[0].manifest == draft
    assert history[0].created_by == "ann"
    assert history[0].org == "acme"
    assert history[0].created_at.tzinfo is not None
    assert history[1].action is RevisionAction.PUBLISH
    assert served_revision(history) == history[1]
    assert current_draft(history) is None
    assert await store.workflow_ids("acme") == ["other", "trip"]
    assert await store.workflow_ids("globex") == ["trip"]
    assert await store.orgs() == ["acme", "globex"]
    assert await store.history("nope", "acme") == []
    assert await store.change_marker() == 4


async def test_concurrent_appends_get_distinct_revisions(database: Database) -> None:
    store = SqlWorkflowStore(database)
    manifest = make_manifest("busy", status="draft")
    done = await asyncio.gather(
        *(store.append(manifest, RevisionAction.UPDATE, f"u{i}", "acme") for i in range(8))
    )
    assert sorted(r.revision for r in done) == list(range(1, 9))
    assert [h.revision for h in await store.history("busy", "acme")] == list(range(1, 9))
