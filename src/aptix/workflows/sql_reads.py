"""Reading many authored workflows in a few statements, whatever their number.

Every process serves what the store serves, and reads again after every change anywhere;
authoring lists an org's workflows. Both used to read each workflow's history in a query of
its own: one draft in an org held up the next request of every org on every process for 15
to 31 s with a few thousand drafts, and a list of 3,000 ran past its 30 s limit (review r4
F1 and F2, round 73).

What changed since a process's last read (:func:`served_since`) is the rows past the highest
id it read, plus the ids below it it has not seen yet (ids are handed out before commit, so
a transaction that took its id earlier may commit later), read with the change counter in
one statement, so in one snapshot. Each append commits one row and one bump together: as
many new rows as bumps means those rows are every change since. Any other count (a row
committed below the ids kept, rows changed by hand with a bump, as deployment.md's move of a
workflow to its org does) and every served workflow is read again. Of the rows read, only
the workflows a publish, status change or removal touched have their served revision read,
one statement per :data:`BATCH` of them: a draft costs the one statement.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy import Connection, and_, case, func, or_, select, tuple_

from aptix.db.engine import Database
from aptix.workflows.manifest import WorkflowManifest
from aptix.workflows.store import DECIDING, Key, RevisionAction, ServedChanges, StoredRevision
from aptix.workflows.tables import CHANGES_ROW_ID, WorkflowChangesRow, WorkflowRevisionRow

__all__ = ["BATCH", "latest", "served_since", "stored_revision"]

#: Workflows whose served revision one statement reads (two bound parameters each).
BATCH = 500
#: Ids below the newest read that were not seen yet, and may still commit; beyond this many
#: the oldest are let go: one that commits after all makes the counts differ (a full read).
MAX_PENDING = 256

_REVISIONS = WorkflowRevisionRow.__table__
_CHANGES = WorkflowChangesRow.__table__
_DECIDING = [action.value for action in DECIDING]


@dataclass(frozen=True, slots=True)
class _Cursor:
    """Where a process's last read ended: the counter and the row ids it has seen."""

    counter: int
    #: The highest row id read.
    last_id: int
    #: Ids below ``last_id`` not read yet: a transaction holding one may still commit.
    pending: frozenset[int]


async def served_since(database: Database, cursor: object | None) -> ServedChanges:
    """The served revisions of the workflows changed since ``cursor``; of all without one."""
    if isinstance(cursor, _Cursor):
        counter, appended = await database.read_one(partial(_appended_since, cursor=cursor))
        if counter is not None and counter - cursor.counter == len(appended):
            touched = {(row.org, row.workflow_id) for row in appended if row.action in _DECIDING}
            served: dict[Key, StoredRevision | None] = dict.fromkeys(touched)
            for batch in _batches(sorted(touched)):
                found = await database.read_one(partial(_deciding, keys=batch))
                served.update({(row.org, row.workflow_id): _served(row) for row in found})
            after = _advanced(cursor, counter, [row.id for row in appended])
            return ServedChanges(counter, after, complete=False, served=served)
    return await _everything(database)


async def _everything(database: Database) -> ServedChanges:
    """Every served revision, and a cursor at the counter read first."""
    counter, ids = await database.read_one(_newest_ids)
    everything = await database.read_one(partial(_deciding, keys=None))
    served: dict[Key, StoredRevision | None] = {}
    for row in everything:
        if (entry := _served(row)) is not None:
            served[(row.org, row.workflow_id)] = entry
    if counter is None:  # the counter's row was deleted by hand: the next read is whole too
        return ServedChanges(0, None, complete=True, served=served)
    last = max(ids, default=0)
    pending = set(range(max(1, last - MAX_PENDING + 1), last)) - set(ids)
    return ServedChanges(counter, _Cursor(counter, last, frozenset(pending)), True, served)


async def latest(database: Database, org: str) -> dict[str, list[StoredRevision]]:
    """Per workflow of ``org``: its newest revision and the newest deciding what is served."""
    rows = await database.read_one(partial(_latest, org=org))
    found: dict[str, list[StoredRevision]] = {}
    for row in rows:
        found.setdefault(row.workflow_id, []).append(stored_revision(row))
    return found


def _appended_since(connection: Connection, cursor: _Cursor) -> tuple[int | None, list[Any]]:
    """The counter and the rows committed past ``cursor``, in one statement (one snapshot)."""
    after = _REVISIONS.c.id > cursor.last_id
    if cursor.pending:
        after = or_(after, _REVISIONS.c.id.in_(sorted(cursor.pending)))
    light = (_REVISIONS.c.id, _REVISIONS.c.org, _REVISIONS.c.workflow_id, _REVISIONS.c.action)
    rows = connection.execute(
        select(_CHANGES.c.counter, *light)
        .select_from(_CHANGES.outerjoin(_REVISIONS, after))
        .where(_CHANGES.c.id == CHANGES_ROW_ID)
    ).all()
    if not rows:
        return None, []
    return int(rows[0].counter), [row for row in rows if row.id is not None]


def _newest_ids(connection: Connection) -> tuple[int | None, list[int]]:
    """The counter and the newest row ids, in one statement: where a full read starts."""
    newest = select(func.coalesce(func.max(_REVISIONS.c.id), 0)).scalar_subquery()
    rows = connection.execute(
        select(_CHANGES.c.counter, _REVISIONS.c.id)
        .select_from(_CHANGES.outerjoin(_REVISIONS, _REVISIONS.c.id > newest - MAX_PENDING))
        .where(_CHANGES.c.id == CHANGES_ROW_ID)
    ).all()
    if not rows:
        return None, []
    return int(rows[0].counter), [int(row.id) for row in rows if row.id is not None]


def _deciding(connection: Connection, keys: Collection[Key] | None) -> Sequence[Any]:
    """Each workflow's newest revision that decides what is served (of ``keys``, or all)."""
    top = select(
        _REVISIONS.c.org, _REVISIONS.c.workflow_id, func.max(_REVISIONS.c.revision).label("top")
    ).where(_REVISIONS.c.action.in_(_DECIDING))
    if keys is not None:
        top = top.where(tuple_(_REVISIONS.c.org, _REVISIONS.c.workflow_id).in_(list(keys)))
    newest = top.group_by(_REVISIONS.c.org, _REVISIONS.c.workflow_id).subquery()
    return connection.execute(
        select(_REVISIONS).join(
            newest,
            and_(
                _REVISIONS.c.org == newest.c.org,
                _REVISIONS.c.workflow_id == newest.c.workflow_id,
                _REVISIONS.c.revision == newest.c.top,
            ),
        )
    ).all()


def _latest(connection: Connection, org: str) -> Sequence[Any]:
    """``org``'s newest revision of each workflow, and the newest deciding what is served."""
    each = _REVISIONS.c.workflow_id
    deciding = case((_REVISIONS.c.action.in_(_DECIDING), _REVISIONS.c.revision))
    # Window functions over the org's rows, then its chosen rows by id: one scan and a sort
    # whatever the planner believes of the table (a join on "newest or deciding" ran as a
    # nested loop, 1.8 s at 3,000 workflows, on a table not analyzed yet).
    ranked = (
        select(
            _REVISIONS.c.id,
            _REVISIONS.c.revision,
            func.max(_REVISIONS.c.revision).over(partition_by=each).label("newest"),
            func.max(deciding).over(partition_by=each).label("deciding"),
        )
        .where(_REVISIONS.c.org == org)
        .subquery()
    )
    chosen = select(ranked.c.id).where(
        or_(ranked.c.revision == ranked.c.newest, ranked.c.revision == ranked.c.deciding)
    )
    return connection.execute(
        select(_REVISIONS)
        .where(_REVISIONS.c.id.in_(chosen))
        .order_by(_REVISIONS.c.workflow_id, _REVISIONS.c.revision)
    ).all()


def _advanced(cursor: _Cursor, counter: int, ids: list[int]) -> _Cursor:
    """``cursor`` moved past the rows ``ids`` just read."""
    seen = set(ids)
    last = max(cursor.last_id, max(ids, default=0))
    skipped = set(range(max(cursor.last_id + 1, last - MAX_PENDING), last)) - seen
    pending = sorted((cursor.pending - seen) | skipped)[-MAX_PENDING:]
    return _Cursor(counter, last, frozenset(pending))


def _batches(keys: list[Key]) -> list[list[Key]]:
    return [keys[start : start + BATCH] for start in range(0, len(keys), BATCH)]


def _served(row: Any) -> StoredRevision | None:
    """The served revision a deciding row stands for: none when it is a removal."""
    return None if row.action == RevisionAction.REMOVE.value else stored_revision(row)


def stored_revision(row: Any) -> StoredRevision:
    """One revision row (an ORM row or a selected one) as a :class:`StoredRevision`."""
    return StoredRevision(
        workflow_id=row.workflow_id,
        revision=row.revision,
        action=RevisionAction(row.action),
        manifest=WorkflowManifest.model_validate(json.loads(row.manifest_json)),
        created_at=row.created_at,
        created_by=row.created_by,
        org=row.org,
    )
