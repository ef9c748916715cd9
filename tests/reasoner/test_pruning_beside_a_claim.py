"""Pruning never deletes a session a claim holds on PostgreSQL (review r4 F3).

A claim locks its session's row before it starts a turn. A prune that meets that lock skips
the session instead of waiting for it: the claim's turn is kept with its session, and the
other old sessions still go. Prunes run at once take turns batch by batch, so none of them
waits for another's locks while that one waits for its own.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any, cast

import pytest
from sqlalchemy import Table, func, insert, select, update

from aptix.db.engine import Database, open_database
from aptix.db.types import utc_now
from aptix.reasoner.pruning import Pruned, prune_sessions
from aptix.reasoner.tables import TurnRow
from aptix.sessions.tables import SessionRow
from tests.databases import create_pg_database, drop_pg_database

SESSIONS = cast(Table, SessionRow.__table__)
TURNS = cast(Table, TurnRow.__table__)


@pytest.fixture
async def database() -> AsyncIterator[Database]:
    url = await asyncio.to_thread(create_pg_database)
    opened = await open_database(url)
    try:
        yield opened
    finally:
        await opened.close()
        await asyncio.to_thread(drop_pg_database, url)


def _session(sid: str, at: Any) -> dict[str, Any]:
    return {
        "id": sid,
        "org": "acme",
        "user_id": "ann",
        "mode": "general",
        "created_at": at,
        "updated_at": at,
        "version": 1,
    }


def _turn(sid: str, seq: int, status: str, at: Any) -> dict[str, Any]:
    return {
        "id": uuid.uuid4().hex,
        "session_id": sid,
        "org": "acme",
        "user_id": "ann",
        "seq": seq,
        "status": status,
        "instruction": "hi",
        "data": {},
        "created_at": at,
        "updated_at": at,
        "version": 1,
    }


async def test_a_session_whose_claim_holds_its_lock_is_skipped(database: Database) -> None:
    now = utc_now()
    old = now - timedelta(days=40)
    idle, claimed = uuid.uuid4().hex, uuid.uuid4().hex
    async with database.engine.begin() as tx:
        await tx.execute(insert(SESSIONS), [_session(idle, old), _session(claimed, old)])
        await tx.execute(insert(TURNS), [_turn(idle, 1, "completed", old)])
        await tx.execute(insert(TURNS), [_turn(claimed, 1, "completed", old)])

    async with database.engine.connect() as claim:
        # What SqlTurnStore.claim does, its transaction left open: lock, insert, touch.
        await claim.execute(select(SESSIONS).where(SESSIONS.c.id == claimed).with_for_update())
        await claim.execute(insert(TURNS), [_turn(claimed, 2, "running", now)])
        await claim.execute(update(SESSIONS).where(SESSIONS.c.id == claimed).values(updated_at=now))

        async with asyncio.timeout(30):  # waiting for the claim's lock would never end
            pruned = await prune_sessions(database, now - timedelta(days=30))
        await claim.commit()

    assert pruned == Pruned(sessions=1, turns=1, kept=0)
    async with database.engine.connect() as tx:
        left = dict(
            (
                await tx.execute(
                    select(TURNS.c.session_id, func.count()).group_by(TURNS.c.session_id)
                )
            ).all()
        )
    assert left == {claimed: 2}


async def test_prunes_run_at_once_each_finish_and_delete_every_session_once(
    database: Database,
) -> None:
    # Each session is the parent of sessions batches away from it, so a batch updates
    # children that another prune's batch holds: 3 of 3 such runs deadlocked before.
    now = utc_now()
    old = now - timedelta(days=40)
    ids = sorted(uuid.uuid4().hex for _ in range(600))
    async with database.engine.begin() as tx:
        await tx.execute(insert(SESSIONS), [_session(sid, old) for sid in ids])
        await tx.execute(insert(TURNS), [_turn(sid, 1, "completed", old) for sid in ids])
        for i, sid in enumerate(ids):
            parent = ids[(i + 25) % len(ids)] if i % 3 else ids[(i - 25) % len(ids)]
            await tx.execute(
                update(SESSIONS).where(SESSIONS.c.id == sid).values(parent_session_id=parent)
            )

    async with asyncio.timeout(60):
        pruned = await asyncio.gather(
            *(prune_sessions(database, now - timedelta(days=30), batch_size=10) for _ in range(4))
        )

    assert sum(p.sessions for p in pruned) == len(ids)
    assert sum(p.turns for p in pruned) == len(ids)
    async with database.engine.connect() as tx:
        assert (await tx.execute(select(func.count()).select_from(SESSIONS))).scalar_one() == 0
