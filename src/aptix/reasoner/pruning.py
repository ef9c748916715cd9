"""Deleting the sessions unused since a cutoff, with everything stored for them.

A session goes with its turns (each holding the ledger of its calls), its mode history and its
conversation fingerprints; a session branched from it stays, without its parent. A session is
unused when neither it nor any of its turns changed since the cutoff and none of its turns
runs or waits for its client (a hand-off, an approval): such a session is never deleted.

Servers may use the database meanwhile. Each batch is one transaction. On PostgreSQL it
locks the sessions it picks (``FOR UPDATE SKIP LOCKED``, skipping those a claim holds now),
then reads them again: a claim locks its session before it starts or resumes a turn, so a
session that was still unused once locked stays so until the batch commits, and a request
for it afterwards finds it gone, as any unknown session. On SQLite the batch holds the write
lock, and pauses between batches let the servers' writes in.

Prunes run at once (two operators, two cron hosts) take turns batch by batch on PostgreSQL:
a batch also updates the sessions branched from those it deletes, which another prune's
batch may hold, so two batches at once could each wait for the other's locks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    Connection,
    CursorResult,
    Table,
    and_,
    delete,
    exists,
    func,
    or_,
    select,
    text,
    update,
)

from aptix.db.engine import Database
from aptix.reasoner.record import OPEN
from aptix.reasoner.tables import TurnRow
from aptix.sessions.tables import FingerprintRow, ModeHistoryRow, SessionRow

__all__ = ["BATCH_SIZE", "Pruned", "count_prunable", "prune_sessions"]

#: Sessions deleted per transaction: short enough that a server waits for it unnoticed.
BATCH_SIZE = 200
#: The pause after each batch on SQLite: SQLite's busy handler retries a waiting writer at
#: least this often, so every server waiting for the write lock gets it between batches.
SQLITE_PAUSE_SECONDS = 0.1
#: The PostgreSQL advisory lock a prune's batch holds until it commits (any fixed key will do
#: that other code does not take; this one spells "aptixprn" in ASCII).
_PG_PRUNE_LOCK = 0x617074697870726E

_SESSIONS = cast(Table, SessionRow.__table__)
_TURNS = cast(Table, TurnRow.__table__)
_HISTORY = cast(Table, ModeHistoryRow.__table__)
_FINGERPRINTS = cast(Table, FingerprintRow.__table__)


@dataclass(frozen=True, slots=True)
class Pruned:
    """How many sessions, and turns of theirs, were (or would be) deleted; and how many kept.

    ``kept``: sessions last used before the cutoff that stay, a turn of theirs running,
    waiting for its client, or changed since.
    """

    sessions: int = 0
    turns: int = 0
    kept: int = 0

    def __add__(self, other: Pruned) -> Pruned:
        return Pruned(self.sessions + other.sessions, self.turns + other.turns, self.kept)


def _in_use(cutoff: datetime) -> ColumnElement[bool]:
    """A turn of the session is open, or changed since ``cutoff`` (an outcome settled late)."""
    return exists().where(
        _TURNS.c.session_id == _SESSIONS.c.id,
        or_(_TURNS.c.status.in_(OPEN), _TURNS.c.updated_at >= cutoff),
    )


def _unused(cutoff: datetime) -> ColumnElement[bool]:
    return and_(_SESSIONS.c.updated_at < cutoff, ~_in_use(cutoff))


def _count(tx: Connection, cutoff: datetime) -> Pruned:
    unused = select(_SESSIONS.c.id).where(_unused(cutoff))
    sessions = tx.execute(select(func.count()).select_from(unused.subquery())).scalar_one()
    turns = tx.execute(
        select(func.count()).select_from(_TURNS).where(_TURNS.c.session_id.in_(unused))
    ).scalar_one()
    return Pruned(sessions, turns, _kept(tx, cutoff))


def _kept(tx: Connection, cutoff: datetime) -> int:
    kept = select(func.count()).where(_SESSIONS.c.updated_at < cutoff, _in_use(cutoff))
    return int(tx.execute(kept).scalar_one())


async def count_prunable(database: Database, cutoff: datetime) -> Pruned:
    """What :func:`prune_sessions` would delete now, without deleting anything."""
    return await database.read_one(lambda tx: _count(tx, cutoff))


async def prune_sessions(
    database: Database,
    cutoff: datetime,
    *,
    batch_size: int = BATCH_SIZE,
    progress: Callable[[Pruned], None] | None = None,
) -> Pruned:
    """Delete the sessions unused since ``cutoff``, ``batch_size`` a transaction.

    ``progress`` is told the running totals after each batch that deleted something.
    Cancelled (Ctrl-C) during a batch, it lets that batch finish and tells it too, then
    raises :class:`asyncio.CancelledError`.
    """
    locking = not database.is_sqlite
    done, after = Pruned(), ""
    while True:
        started = time.monotonic()
        batch = _batch(cutoff, after, batch_size, locking=locking)
        running = asyncio.ensure_future(database.run(batch))
        try:
            deleted, picked = await asyncio.shield(running)
        except asyncio.CancelledError:
            # SQLite's worker thread commits the batch whatever the await does, so every
            # batch deleted is told: on PostgreSQL too, where it then commits as well.
            await asyncio.wait((running,))  # a second cancel ends this wait too
            if not running.cancelled() and running.exception() is None:
                deleted, _ = running.result()
                if deleted.sessions and progress is not None:
                    progress(done + deleted)
            raise
        if picked:
            after = picked[-1]  # ids in order: each batch goes on where the last one stopped
        if deleted.sessions:
            done += deleted
            if progress is not None:
                progress(done)
        if len(picked) < batch_size:
            break
        if database.is_sqlite:
            await asyncio.sleep(max(SQLITE_PAUSE_SECONDS, time.monotonic() - started))
    kept = await database.read_one(lambda tx: _kept(tx, cutoff))
    return Pruned(done.sessions, done.turns, kept)


def _batch(
    cutoff: datetime, after: str, size: int, *, locking: bool
) -> Callable[[Connection], tuple[Pruned, list[str]]]:
    """One batch's transaction: the sessions it picked (in id order) and what it deleted."""
    picking = (
        select(_SESSIONS.c.id)
        .where(_SESSIONS.c.id > after, _unused(cutoff))
        .order_by(_SESSIONS.c.id)
        .limit(size)
    )
    if locking:
        picking = picking.with_for_update(skip_locked=True)

    def transaction(tx: Connection) -> tuple[Pruned, list[str]]:
        if locking:
            tx.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_PRUNE_LOCK})
        picked = list(tx.execute(picking).scalars())
        ids = picked
        if locking and picked:
            # Read again under the locks, with what committed until now: a turn that began
            # or changed before the lock was taken shows here, and none can begin after.
            again = select(_SESSIONS.c.id).where(_SESSIONS.c.id.in_(picked), _unused(cutoff))
            ids = list(tx.execute(again).scalars())
        if not ids:
            return Pruned(), picked
        turns = _deleted(tx, _TURNS, ids)
        _deleted(tx, _FINGERPRINTS, ids)
        _deleted(tx, _HISTORY, ids)
        # What the foreign key's ON DELETE SET NULL does, with the version a reader compares.
        tx.execute(
            update(_SESSIONS)
            .where(_SESSIONS.c.parent_session_id.in_(ids))
            .values(parent_session_id=None, version=_SESSIONS.c.version + 1)
        )
        sessions = _rowcount(tx.execute(delete(_SESSIONS).where(_SESSIONS.c.id.in_(ids))))
        return Pruned(sessions, turns), picked

    return transaction


def _deleted(tx: Connection, table: Table, ids: list[str]) -> int:
    return _rowcount(tx.execute(delete(table).where(table.c.session_id.in_(ids))))


def _rowcount(result: Any) -> int:
    return int(cast(CursorResult[Any], result).rowcount)
