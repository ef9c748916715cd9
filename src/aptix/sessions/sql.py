"""``SqlSessionManager``: the session store on SQLAlchemy (SQLite or PostgreSQL)."""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, Row, Table, bindparam, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from aptix.db.engine import Database
from aptix.db.types import utc_now
from aptix.errors import NotFoundError
from aptix.modes.catalog import ModeCatalog
from aptix.results import InvokeResult
from aptix.sessions.manager import Unchecked, workflow_changed_message
from aptix.sessions.models import AgentSession, ModeHistoryEntry
from aptix.sessions.tables import ModeHistoryRow, SessionRow
from aptix.settings_keys import owner_name_problem

__all__ = ["SqlSessionManager", "new_session_id", "session_of"]

SESSION_ID = re.compile(r"^[0-9a-f]{32}$")
_SESSIONS = cast(Table, SessionRow.__table__)
_PARENT = select(_SESSIONS.c.active_workflow_id).where(
    _SESSIONS.c.id == bindparam("sid"), _SESSIONS.c.org == bindparam("org")
)
_INSERT = insert(_SESSIONS).returning(*_SESSIONS.c)
MAX_PAGE = 200


def new_session_id() -> str:
    """A new session id: 32 lowercase hex characters (a GUID without hyphens)."""
    return uuid.uuid4().hex


class SqlSessionManager:
    """Sessions in the database, every query scoped to the caller's org.

    Mode changes lock the session row (``SELECT … FOR UPDATE`` on PostgreSQL, ``BEGIN
    IMMEDIATE`` on SQLite) so concurrent changes queue and each appends exactly one history
    entry whose previous mode is the mode it replaced.
    """

    def __init__(self, database: Database, modes: ModeCatalog) -> None:
        self._db = database
        self._modes = modes

    async def create_session(
        self,
        *,
        org: str,
        user: str,
        mode: str | None = None,
        title: str | None = None,
        parent_session_id: str | None = None,
    ) -> InvokeResult[AgentSession]:
        """Create a session in ``mode`` (the catalog's default when None)."""
        for label, name in (("org", org), ("user", user)):
            # Wider than its column, a name works on SQLite and fails on PostgreSQL.
            if (why := owner_name_problem(name)) is not None:
                return InvokeResult.from_error(f"The {label} name {why}.")
        key = mode if mode is not None else self._modes.default_mode.key
        problem = self._mode_problem(key)
        if problem:
            return InvokeResult.from_error(problem)
        values = _new_values(org, user, key, title, parent_session_id, utc_now())

        def transaction(tx: Connection) -> Row[Any] | None:
            # Core, not the ORM: a new session is one INSERT, and Database.run_one makes it one
            # thread hop on SQLite (POST /v1/agent/execute creates one per new conversation).
            if parent_session_id is not None:
                if not SESSION_ID.match(parent_session_id):
                    return None
                parent = tx.execute(_PARENT, {"sid": parent_session_id, "org": org}).first()
                if parent is None:
                    return None
                # Lineage keeps governance: the child runs under its parent's workflow.
                values["active_workflow_id"] = parent.active_workflow_id
            return tx.execute(_INSERT, values).one()

        # Without a parent the transaction is one INSERT: on PostgreSQL, one round trip.
        run = self._db.run if parent_session_id is not None else self._db.run_one
        row = await run(transaction)
        if row is None:
            return InvokeResult.from_error(f"Unknown session '{parent_session_id}'.")
        return InvokeResult.create(session_of(row))

    async def get_session(self, session_id: str, org: str) -> AgentSession | None:
        """The session, or None when it does not exist in ``org``."""
        async with self._db.transaction() as tx:
            row = await self._row(tx, session_id, org)
            return _to_session(row) if row else None

    async def list_sessions(
        self, org: str, user: str, *, limit: int = 50, offset: int = 0
    ) -> list[AgentSession]:
        """The caller's sessions, most recently updated first."""
        query = (
            select(SessionRow)
            .where(SessionRow.org == org, SessionRow.user_id == user)
            .order_by(SessionRow.updated_at.desc(), SessionRow.id)
            .limit(max(1, min(limit, MAX_PAGE)))
            .offset(max(0, offset))
        )
        async with self._db.transaction() as tx:
            return [_to_session(r) for r in (await tx.scalars(query)).all()]

    async def list_children(self, session_id: str, org: str) -> list[AgentSession]:
        """Sessions branched from ``session_id``, oldest first."""
        query = (
            select(SessionRow)
            .where(SessionRow.parent_session_id == session_id, SessionRow.org == org)
            .order_by(SessionRow.created_at, SessionRow.id)
        )
        async with self._db.transaction() as tx:
            return [_to_session(r) for r in (await tx.scalars(query)).all()]

    async def set_session_mode(
        self, session_id: str, mode: str, reason: str, org: str, user: str
    ) -> InvokeResult[AgentSession]:
        """Change the mode and append a history entry recording the previous mode."""
        problem = self._mode_problem(mode)
        if problem:
            return InvokeResult.from_error(problem)
        async with self._db.transaction() as tx:
            row = await self._switched(tx, session_id, mode, reason, org, user, utc_now())
            if row is None:
                return InvokeResult.from_error(f"Unknown session '{session_id}'.")
            await tx.flush()
            return InvokeResult.create(_to_session(row))

    async def branch_session(
        self, session_id: str, mode: str, reason: str, org: str, user: str
    ) -> InvokeResult[AgentSession]:
        """Change the mode and create the child session in it, in one transaction.

        Returns the child. Either both happen or neither does: a failure to create the
        child rolls the mode change back.
        """
        problem = self._mode_problem(mode)
        if problem:
            return InvokeResult.from_error(problem)
        async with self._db.transaction() as tx:
            now = utc_now()
            row = await self._switched(tx, session_id, mode, reason, org, user, now)
            if row is None:
                return InvokeResult.from_error(f"Unknown session '{session_id}'.")
            child = SessionRow(**_new_values(org, user, mode, None, session_id, now), history=[])
            # Lineage keeps governance (DESIGN §15): the child inherits the active workflow.
            child.active_workflow_id = row.active_workflow_id
            tx.add(child)
            await tx.flush()
            return InvokeResult.create(_to_session(child))

    async def set_active_workflow(
        self,
        session_id: str,
        workflow_id: str | None,
        org: str,
        user: str,
        *,
        expected: str | Unchecked | None = Unchecked.ANY,
    ) -> InvokeResult[AgentSession]:
        """Set, or clear with None, the session's active workflow (if still ``expected``)."""
        async with self._db.transaction() as tx:
            row = await self._row(tx, session_id, org, lock=True)
            if row is None:
                return InvokeResult.from_error(f"Unknown session '{session_id}'.")
            # Compared under the row's lock: a start decided on what another caller has just
            # replaced must not overwrite it (two starts would both report "active").
            if not isinstance(expected, Unchecked) and row.active_workflow_id != expected:
                return InvokeResult.from_error(
                    workflow_changed_message(row.active_workflow_id, expected)
                )
            row.active_workflow_id = workflow_id
            _touch(row, utc_now())
            await tx.flush()
            return InvokeResult.create(_to_session(row))

    def _mode_problem(self, key: str) -> str | None:
        try:
            self._modes.get_mode(key)
        except NotFoundError as exc:
            return str(exc)
        return None

    async def _switched(
        self,
        tx: AsyncSession,
        session_id: str,
        mode: str,
        reason: str,
        org: str,
        user: str,
        now: datetime,
    ) -> SessionRow | None:
        """The locked session row with its mode changed, or None when it does not exist."""
        row = await self._row(tx, session_id, org, lock=True)
        if row is not None:
            _change_mode(row, mode, reason, user, now)
        return row

    async def _row(
        self, tx: AsyncSession, session_id: str, org: str, *, lock: bool = False
    ) -> SessionRow | None:
        if not SESSION_ID.match(session_id):
            return None
        query = select(SessionRow).where(SessionRow.id == session_id, SessionRow.org == org)
        if lock:
            query = query.with_for_update()
        return (await tx.scalars(query)).one_or_none()


def _new_values(
    org: str, user: str, mode: str, title: str | None, parent: str | None, now: datetime
) -> dict[str, Any]:
    return {
        "id": new_session_id(),
        "org": org,
        "user_id": user,
        "title": title,
        "mode": mode,
        "mode_reason": None,
        "mode_set_at": now,
        "parent_session_id": parent,
        "active_workflow_id": None,
        "created_at": now,
        "updated_at": now,
        "version": 1,
    }


def _change_mode(row: SessionRow, mode: str, reason: str, user: str, now: datetime) -> None:
    row.history.append(
        ModeHistoryRow(
            seq=len(row.history) + 1,
            previous_mode=row.mode,
            mode=mode,
            reason=reason,
            changed_at=now,
            changed_by=user,
        )
    )
    row.mode, row.mode_reason, row.mode_set_at = mode, reason, now
    _touch(row, now)


def _touch(row: SessionRow, now: datetime) -> None:
    row.updated_at = now
    row.version += 1


def _to_session(row: SessionRow) -> AgentSession:
    return session_of(
        row,
        tuple(
            ModeHistoryEntry(h.previous_mode, h.mode, h.reason, h.changed_at, h.changed_by)
            for h in row.history
        ),
    )


def session_of(row: Any, mode_history: tuple[ModeHistoryEntry, ...] = ()) -> AgentSession:
    """An ``AgentSession`` from a sessions row: the ORM object or a Core row of its columns."""
    return AgentSession(
        id=row.id,
        org=row.org,
        user=row.user_id,
        title=row.title,
        mode=row.mode,
        mode_reason=row.mode_reason,
        mode_set_at=row.mode_set_at,
        mode_history=mode_history,
        parent_session_id=row.parent_session_id,
        active_workflow_id=row.active_workflow_id,
        created_at=row.created_at,
        updated_at=row.updated_at,
        version=row.version,
    )
