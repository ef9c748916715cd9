"""0005, 0006 and 0008 on a database filled before them: existing authored workflows get an
org, the change counter starts at the stored revisions, and every workflow gets its head."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import Connection, bindparam, text
from sqlalchemy.exc import IntegrityError

from aptix.db.engine import create_engine, open_database
from aptix.db.migrate import _config, current_revision, head_revision
from aptix.db.types import UtcDateTime
from aptix.errors import RevisionConflict
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


def _before_workflow_heads(connection: Connection) -> None:
    cfg = _config()
    cfg.attributes["connection"] = connection
    command.upgrade(cfg, "0007_session_fingerprints")


def _fill_raced(connection: Connection) -> None:
    """What two processes left before 0008: version 0.1.0 of offsite published twice."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    rows = []
    for org, workflow_id, revision, action, status in (
        ("acme", "offsite", 1, "draft", "draft"),
        ("acme", "offsite", 2, "publish", "published"),
        ("acme", "offsite", 3, "publish", "published"),
        ("acme", "offsite", 4, "update", "draft"),
        ("globex", "trip", 1, "draft", "draft"),
    ):
        manifest = make_manifest(workflow_id, version="0.1.0", status=status)
        rows.append(
            {
                "org": org,
                "wid": workflow_id,
                "rev": revision,
                "action": action,
                "status": status,
                "json": json.dumps(manifest.to_wire()),
                "now": now,
            }
        )
    connection.execute(
        text(
            "INSERT INTO workflow_revisions (org, workflow_id, revision, action, version,"
            " status, manifest_json, created_at, created_by)"
            " VALUES (:org, :wid, :rev, :action, '0.1.0', :status, :json, :now, 'ann')"
        ).bindparams(bindparam("now", type_=UtcDateTime())),
        rows,
    )


async def test_0008_gives_every_workflow_a_head_and_keeps_a_doubled_publish(url: str) -> None:
    engine = create_engine(url)
    async with engine.begin() as connection:
        await connection.run_sync(_before_workflow_heads)
        await connection.run_sync(_fill_raced)
    await engine.dispose()

    database = await open_database(url)  # migrates to head
    try:
        store = SqlWorkflowStore(database)
        assert await store.revision("offsite", "acme") == 4
        assert await store.revision("trip", "globex") == 1
        assert await store.orgs() == ["acme", "globex"]
        history = await store.history("offsite", "acme")
        # The second publication of 0.1.0 is kept, as the re-publication it was.
        assert [h.action.value for h in history] == ["draft", "publish", "status", "update"]
        # Changes now compare and set on the head.
        draft = history[-1].manifest
        with pytest.raises(RevisionConflict):
            await store.append(draft, RevisionAction.UPDATE, "bob", "acme", expected_revision=3)
        done = await store.append(draft, RevisionAction.UPDATE, "ann", "acme", expected_revision=4)
        assert done.revision == 5
        # One publication per version, even for a caller that names no revision.
        published = history[1].manifest
        with pytest.raises(IntegrityError):
            await store.append(published, RevisionAction.PUBLISH, "ann", "acme")
        assert await store.revision("offsite", "acme") == 5
    finally:
        await database.close()
