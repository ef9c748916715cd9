"""``SqlWorkflowStore``: the authoring revision log in the database (SQLite or PostgreSQL).

Rows are only ever inserted, so the full version history of every authored workflow is kept
(TUL-006 §8.4, §8.9), with the org it belongs to and who made each revision. Revision
numbers are per (org, workflow). An append is a compare-and-set on ``workflow_heads``: an
``UPDATE … WHERE revision = <the revision it was based on>`` that must change one row (or,
for a new workflow, an ``INSERT`` that the primary key lets only one draft make). The
loser of a race changes nothing and gets :class:`~aptix.errors.RevisionConflict` naming
the winner's revision; the ``(org, workflow_id, revision)`` key is the second line.

The revision rows, not the head, are the truth: a process older than migration 0008 appends
rows without moving the head. An append first moves a head that is behind its rows up to
the newest row (in the same transaction), so a change based on the revision ``history``
shows is accepted, and listing reads the rows, so a workflow such a process drafted is seen.

Every append also bumps the one ``workflow_changes`` counter in its transaction, so a
process that reads a counter value has every revision up to it committed and visible
(a row id would not do: ids are handed out before commit, not in commit order).

Reading many workflows at once (what changed since a process's last read, an org's list)
is :mod:`aptix.workflows.sql_reads`.
"""

from __future__ import annotations

import json
from datetime import datetime

from sqlalchemy import func, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from aptix.db.engine import Database
from aptix.db.types import utc_now
from aptix.errors import RevisionConflict
from aptix.workflows.manifest import WorkflowManifest
from aptix.workflows.sql_reads import latest, served_since, stored_revision
from aptix.workflows.store import RevisionAction, ServedChanges, StoredRevision
from aptix.workflows.tables import (
    CHANGES_ROW_ID,
    WorkflowChangesRow,
    WorkflowHeadRow,
    WorkflowRevisionRow,
)

__all__ = ["SqlWorkflowStore"]


class SqlWorkflowStore:
    """A ``WorkflowStore`` on the runtime's database."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def append(
        self,
        manifest: WorkflowManifest,
        action: RevisionAction,
        actor: str | None,
        org: str,
        *,
        expected_revision: int | None = None,
    ) -> StoredRevision:
        """Append revision ``expected_revision + 1``; :class:`RevisionConflict` if it moved on."""
        workflow_id = manifest.workflow_id
        try:
            async with self._database.transaction() as session:
                if expected_revision is None:
                    await self._queue(session, org, workflow_id)
                newest = await _catch_up_head(session, org, workflow_id)
                based_on = newest if expected_revision is None else expected_revision
                now = utc_now()
                await _advance_head(session, org, workflow_id, based_on, now)
                row = WorkflowRevisionRow(
                    org=org,
                    workflow_id=workflow_id,
                    revision=based_on + 1,
                    action=action.value,
                    version=manifest.version,
                    status=manifest.status.value,
                    manifest_json=json.dumps(manifest.to_wire(), ensure_ascii=False),
                    created_at=now,
                    created_by=actor,
                )
                session.add(row)
                await session.flush()
                await _bump_changes(session)
            return stored_revision(row)
        except IntegrityError:
            # Two drafts inserted the same new head: the one that lost learns the winner's
            # revision. Any other violation (a version published twice) is a bug: raised.
            current = await self.revision(workflow_id, org)
            if expected_revision is not None and current != expected_revision:
                raise RevisionConflict(workflow_id, expected_revision, current) from None
            raise

    async def revision(self, workflow_id: str, org: str) -> int:
        """The newest revision of ``org``'s ``workflow_id``; 0 when it has none."""
        async with self._database.transaction() as session:
            return await _newest(session, org, workflow_id)

    async def _queue(self, session: AsyncSession, org: str, workflow_id: str) -> None:
        if not self._database.is_sqlite:
            # Appends that name no revision queue per workflow (SQLite's BEGIN IMMEDIATE
            # already does), so each lands on the one before.
            await session.execute(
                text("SELECT pg_advisory_xact_lock(hashtext(:key))"),
                {"key": f"aptix.workflow:{org}:{workflow_id}"},
            )

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
            return [stored_revision(row) for row in rows]

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
        query = select(WorkflowChangesRow.counter).where(WorkflowChangesRow.id == CHANGES_ROW_ID)
        # One statement: on PostgreSQL it needs no BEGIN/COMMIT around it (every process
        # asks this at most every 0.5 s); on SQLite it waits for no writer (every request
        # asks it first, /healthz too).
        counter = await self._database.read_one(lambda c: c.execute(query).scalar())
        return int(counter or 0)

    async def served_since(self, cursor: object | None) -> ServedChanges:
        """The served revisions of the workflows changed since ``cursor``; of all without one."""
        return await served_since(self._database, cursor)

    async def latest(self, org: str) -> dict[str, list[StoredRevision]]:
        """Per workflow of ``org``: its newest revision and the newest deciding what is served."""
        return await latest(self._database, org)


async def _newest(session: AsyncSession, org: str, workflow_id: str) -> int:
    revision = await session.scalar(
        select(func.max(WorkflowRevisionRow.revision)).where(
            WorkflowRevisionRow.org == org, WorkflowRevisionRow.workflow_id == workflow_id
        )
    )
    return int(revision or 0)


async def _catch_up_head(session: AsyncSession, org: str, workflow_id: str) -> int:
    """The newest revision, first moving up a head a pre-0008 process left behind it."""
    newest = await _newest(session, org, workflow_id)
    head = await session.scalar(
        select(WorkflowHeadRow.revision).where(
            WorkflowHeadRow.org == org, WorkflowHeadRow.workflow_id == workflow_id
        )
    )
    if newest == 0 or (head is not None and head >= newest):
        return newest
    if head is None:
        session.add(
            WorkflowHeadRow(org=org, workflow_id=workflow_id, revision=newest, updated_at=utc_now())
        )
        await session.flush()  # a concurrent catch-up makes this an IntegrityError: a conflict
    else:
        # Only upwards: a concurrent append that moved it further is not undone.
        await session.execute(
            update(WorkflowHeadRow)
            .where(
                WorkflowHeadRow.org == org,
                WorkflowHeadRow.workflow_id == workflow_id,
                WorkflowHeadRow.revision < newest,
            )
            .values(revision=newest, updated_at=utc_now())
        )
    return newest


async def _advance_head(
    session: AsyncSession, org: str, workflow_id: str, based_on: int, now: datetime
) -> None:
    """Move the head from ``based_on`` to the next revision, or raise RevisionConflict."""
    if based_on == 0:
        session.add(WorkflowHeadRow(org=org, workflow_id=workflow_id, revision=1, updated_at=now))
        await session.flush()  # a concurrent first draft makes this an IntegrityError
        return
    moved = await session.execute(
        update(WorkflowHeadRow)
        .where(
            WorkflowHeadRow.org == org,
            WorkflowHeadRow.workflow_id == workflow_id,
            WorkflowHeadRow.revision == based_on,
        )
        .values(revision=based_on + 1, updated_at=now)
    )
    if getattr(moved, "rowcount", 0) != 1:
        raise RevisionConflict(workflow_id, based_on, await _newest(session, org, workflow_id))


async def _bump_changes(session: AsyncSession) -> None:
    bumped = await session.execute(
        update(WorkflowChangesRow)
        .where(WorkflowChangesRow.id == CHANGES_ROW_ID)
        .values(counter=WorkflowChangesRow.counter + 1)
    )
    if getattr(bumped, "rowcount", 1) == 0:  # the row was deleted by hand: start it again
        session.add(WorkflowChangesRow(id=CHANGES_ROW_ID, counter=1))
