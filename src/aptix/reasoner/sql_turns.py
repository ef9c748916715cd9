"""``SqlTurnStore``: turn records in the shared database."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import CursorResult, select, update

from aptix.db.engine import Database
from aptix.db.types import utc_now
from aptix.reasoner.tables import TurnRow
from aptix.reasoner.turns import TurnRecord

__all__ = ["SqlTurnStore"]

_JSON_FIELDS = (
    "messages",
    "pending_calls",
    "tool_calls",
    "model_calls",
    "warnings",
    "result",
    "answers",
)


class SqlTurnStore:
    """Turns as rows; the transcript and audit lists live in one JSON column."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def list_turns(self, session_id: str, org: str) -> list[TurnRecord]:
        """The session's turns, oldest first."""
        query = (
            select(TurnRow)
            .where(TurnRow.session_id == session_id, TurnRow.org == org)
            .order_by(TurnRow.seq)
        )
        async with self._db.transaction() as tx:
            return [_to_record(row) for row in (await tx.scalars(query)).all()]

    async def add(self, turn: TurnRecord) -> None:
        """Store a new turn."""
        async with self._db.transaction() as tx:
            tx.add(
                TurnRow(
                    id=turn.id,
                    session_id=turn.session_id,
                    org=turn.org,
                    user_id=turn.user,
                    seq=turn.seq,
                    status=turn.status,
                    instruction=turn.instruction,
                    text=turn.text,
                    data=_data(turn),
                    created_at=turn.created_at,
                    updated_at=turn.updated_at,
                    version=turn.version,
                )
            )

    async def update(self, turn: TurnRecord) -> bool:
        """Save ``turn`` if its version is still current (optimistic concurrency)."""
        now = utc_now()
        statement = (
            update(TurnRow)
            .where(TurnRow.id == turn.id, TurnRow.version == turn.version)
            .values(
                status=turn.status,
                text=turn.text,
                data=_data(turn),
                updated_at=now,
                version=turn.version + 1,
            )
        )
        async with self._db.transaction() as tx:
            outcome = await tx.execute(statement)
            changed = cast(CursorResult[Any], outcome).rowcount
        if changed != 1:
            return False
        turn.version += 1
        turn.updated_at = now
        return True


def _data(turn: TurnRecord) -> dict[str, Any]:
    return {name: getattr(turn, name) for name in _JSON_FIELDS}


def _to_record(row: TurnRow) -> TurnRecord:
    data = row.data or {}
    return TurnRecord(
        id=row.id,
        session_id=row.session_id,
        org=row.org,
        user=row.user_id,
        seq=row.seq,
        instruction=row.instruction,
        status=row.status,  # type: ignore[arg-type]
        text=row.text,
        created_at=row.created_at,
        updated_at=row.updated_at,
        version=row.version,
        **{name: data.get(name) or _empty(name) for name in _JSON_FIELDS},
    )


def _empty(name: str) -> Any:
    return None if name == "result" else {} if name == "answers" else []
