"""``SqlWorkflowStore``: the authoring revision log in the database (SQLite or PostgreSQL).

Rows are only ever inserted, so the full version history of every authored workflow is kept
(TUL-006 §8.4, §8.9), with the org it belongs to and who made each revision. Revision
numbers are per (org, workflow); two concurrent appends to one workflow collide on the
``(org, workflow_id, revision)`` key and the loser retries.

Every append also bumps the one ``workflow_changes`` counter in its transaction, so a
process that reads a counter value has every revision up to it committed and visible
(a row id would not do: ids are handed out before commit, not in commit order).
"""

from __future__ import annotations

import json

from sqlalchemy import func, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from aptix.db.engine import Database
from aptix.db.types import utc_now
from aptix.workflows.manifest import WorkflowManifest
from aptix.workflows.store import RevisionAction, StoredRevision
from aptix.workflows.tables import CHANGES_ROW_ID, WorkflowChangesRow, WorkflowRevisionRow

__all__ = ["SqlWorkflowStore"]

APPEND_ATTEMPTS = 5


class SqlWorkflowStore:
    """A ``WorkflowStore`` on the runtime's database."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def append(
        self, manifest: WorkflowManifest, action: RevisionAction, actor: str | None, org: str
    ) -> StoredRevision:
        """Append a revision of ``org``'s ``manifest.workflow_id`` and return it."""
        for attempt in range(1, APPEND_ATTEMPTS + 1):
            try:
                async with self._database.transaction() as session:
                    if not self._database.is_sqlite:
                        # Serialise appends per workflow (SQLite's BEGIN IMMEDIATE already
                        # does); the unique key and the retry remain the backstop.
                        await session.execute(
                            text("SELECT pg_advisory_xact_lock(hashtext(:key))"),
                            {"key": f"aptix.workflow:{org}:{manifest.workflow_id}"},
                        )
                    last = await session.scalar(
                        select(func.max(WorkflowRevisionRow.revision)).where(
                            WorkflowRevisionRow.org == org,
                            WorkflowRevisionRow.workflow_id == manifest.workflow_id,
                        )
                    )
                    row = WorkflowRevisionRow(
                        org=org,
                        workflow_id=manifest.workflow_id,
                        revision=(last or 0) + 1,
                        action=action.value,
                        version=manifest.version,
                        status=manifest.status.value,
                        manifest_json=json.dumps(manifest.to_wire(), ensure_ascii=False),
                        created_at=utc_now(),
                        created_by=actor,
                    )
                    session.add(row)
                    await session.flush()
                    await _bump_changes(session)
                return _revision(row)
            except IntegrityError:
                if attempt == APPEND_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def history(self, workflow_id: str, org: str) -> list[StoredRevision]:
        """Every revision of ``org``'s ``workflow_id``, oldest first."""
        async with self._database.transaction() as session:
            rows = await session.scalars(
                select(WorkflowRevisionRow)
                .where(
                    WorkflowRevisionRow.org == org,
                    WorkflowRevisionRow.workflow_id == workflow_id,
                )
                .order_by(WorkflowRevisionRow.revision)
            )
            return [_revision(row) for row in rows]

    async def workflow_ids(self, org: str) -> list[str]:
        """The ids ``org`` has revisions of, sorted."""
        async with self._database.transaction() as session:
            ids = await session.scalars(
                select(WorkflowRevisionRow.workflow_id)
                .where(WorkflowRevisionRow.org == org)
                .distinct()
                .order_by(WorkflowRevisionRow.workflow_id)
            )
            return list(ids)

    async def orgs(self) -> list[str]:
        """The orgs with revisions, sorted."""
        async with self._database.transaction() as session:
            orgs = await session.scalars(
                select(WorkflowRevisionRow.org).distinct().order_by(WorkflowRevisionRow.org)
            )
            return list(orgs)

    async def change_marker(self) -> int:
        """The change counter: one primary-key read; it grows with every committed append."""
        async with self._database.transaction() as session:
            counter = await session.scalar(
                select(WorkflowChangesRow.counter).where(WorkflowChangesRow.id == CHANGES_ROW_ID)
            )
            return int(counter or 0)


async def _bump_changes(session: AsyncSession) -> None:
    bumped = await session.execute(
        update(WorkflowChangesRow)
        .where(WorkflowChangesRow.id == CHANGES_ROW_ID)
        .values(counter=WorkflowChangesRow.counter + 1)
    )
    if getattr(bumped, "rowcount", 1) == 0:  # the row was deleted by hand: start it again
        session.add(WorkflowChangesRow(id=CHANGES_ROW_ID, counter=1))


def _revision(row: WorkflowRevisionRow) -> StoredRevision:
    return StoredRevision(
        workflow_id=row.workflow_id,
        revision=row.revision,
        action=RevisionAction(row.action),
        manifest=WorkflowManifest.model_validate(json.loads(row.manifest_json)),
        created_at=row.created_at,
        created_by=row.created_by,
        org=row.org,
    )
