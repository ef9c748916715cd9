"""Helpers for the tests of reading many stored workflows: databases, seeds, statement counts."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text

from aptix.db.engine import Database
from aptix.workflows.tables import WorkflowHeadRow, WorkflowRevisionRow
from tests.databases import create_pg_database, drop_pg_database

#: What update_workflow sets to make a draft publishable.
FIELDS = {
    "userIntentPatterns": ["plan the thing"],
    "instructionText": "1. Ask.\n2. Do.",
    "permittedTools": ["agent_calculator"],
    "completionCriteria": ["Done."],
}


@pytest.fixture
def own_pg() -> Iterator[str]:
    """An empty PostgreSQL database of the test's own (a missing server fails the test)."""
    url = create_pg_database()
    yield url
    drop_pg_database(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each test twice, on an empty database (PostgreSQL is never skipped)."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'aptix.db'}"
    url: str = request.getfixturevalue("own_pg")
    return url


@asynccontextmanager
async def statements(database: Database) -> AsyncIterator[list[str]]:
    """Every SQL statement ``database`` sends while inside."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        seen.append(statement)

    engines = [database.engine.sync_engine]
    if database.sync_engine is not None:
        engines.append(database.sync_engine)
    for engine in engines:
        event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        for engine in engines:
            event.remove(engine, "before_cursor_execute", record)


async def seed_drafts(database: Database, org: str, count: int) -> None:
    """``count`` drafts ``w0``… of ``org``, stored as draft_workflow stores them, at once."""
    now = datetime.now(UTC)
    rows = [
        {
            "org": org,
            "workflow_id": f"w{n}",
            "revision": 1,
            "action": "draft",
            "version": "0.1.0",
            "status": "draft",
            "manifest_json": json.dumps(
                {
                    "workflowId": f"w{n}",
                    "title": f"Title {n}",
                    "description": f"Desc {n}",
                    "version": "0.1.0",
                    "status": "draft",
                }
            ),
            "created_at": now,
            "created_by": "alice",
        }
        for n in range(count)
    ]
    heads = [
        {"org": org, "workflow_id": f"w{n}", "revision": 1, "updated_at": now} for n in range(count)
    ]
    async with database.transaction() as session:
        await session.execute(WorkflowRevisionRow.__table__.insert(), rows)
        await session.execute(WorkflowHeadRow.__table__.insert(), heads)
        await session.execute(text("UPDATE workflow_changes SET counter = counter + 1"))
