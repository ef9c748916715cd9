"""0005 and 0006 on a database filled before them: existing authored workflows get an org,
and the change counter starts at the stored revisions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import Connection, bindparam, text

from aptix.db.engine import create_engine, open_database
from aptix.db.migrate import _config, current_revision, head_revision
from aptix.db.types import UtcDateTime
from aptix.workflows.sql_store import SqlWorkflowStore
from aptix.workflows.store import RevisionAction
from tests.databases import create_pg_database, drop_pg_database
from tests.workflows.conftest import make_manifest


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
        return
    made = create_pg_database()
    yield made
    drop_pg_database(made)


def _before_workflow_org(connection: Connection) -> None:
    cfg = _config()
    cfg.attributes["connection"] = connection
    command.upgrade(cfg, "0004_turn_leases")


def _fill(connection: Connection) -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    when = bindparam("now", type_=UtcDateTime())
    connection.execute(
        text(
            "INSERT INTO sessions (id, org, user_id, mode, mode_set_at, created_at, updated_at,"
            " version) VALUES (:id, :org, :user, 'general', :now, :now, :now, 1)"
        ).bindparams(when),
        [
            {"id": "a" * 32, "org": "acme", "user": "ann", "now": now},
            {"id": "b" * 32, "org": "acme", "user": "sam", "now": now},
            {"id": "c" * 32, "org": "globex", "user": "sam", "now": now},
        ],
    )
    rows = []
    for workflow_id, author, action, revision in (
        ("offsite", "ann", "draft", 1),
        ("offsite", "ann", "publish", 2),
        ("shared_name", "sam", "publish", 1),  # sam is in two orgs: cannot tell
        ("orphan", None, "publish", 1),
    ):
        manifest = make_manifest(workflow_id, version="1.0.0")
        rows.append(
            {
                "wid": workflow_id,
                "rev": revision,
                "action": action,
                "status": "published",
                "json": json.dumps(manifest.to_wire()),
                "now": now,
                "by": author,
            }
        )
    connection.execute(
        text(
            "INSERT INTO workflow_revisions (workflow_id, revision, action, version, status,"
            " manifest_json, created_at, created_by)"
            " VALUES (:wid, :rev, :action, '1.0.0', :status, :json, :now, :by)"
        ).bindparams(when),
        rows,
    )


async def test_existing_rows_get_the_org_of_their_author(url: str) -> None:
    engine = create_engine(url)
    async with engine.begin() as connection:
        await connection.run_sync(_before_workflow_org)
        await connection.run_sync(_fill)
    await engine.dispose()

    database = await open_database(url)  # migrates to head
    try:
        assert await current_revision(database.engine) == head_revision()
        store = SqlWorkflowStore(database)
        assert await store.orgs() == ["acme", "local"]
        assert await store.workflow_ids("acme") == ["offsite"]
        assert await store.workflow_ids("local") == ["orphan", "shared_name"]
        history = await store.history("offsite", "acme")
        assert [(h.revision, h.action.value, h.created_by) for h in history] == [
            (1, "draft", "ann"),
            (2, "publish", "ann"),
        ]
        # 0006: the change counter starts at the revisions already stored, and every
        # append bumps it.
        assert await store.change_marker() == 4
        await store.append(
            make_manifest("offsite", version="1.1.0"), RevisionAction.UPDATE, "ann", "acme"
        )
        assert await store.change_marker() == 5
    finally:
        await database.close()
