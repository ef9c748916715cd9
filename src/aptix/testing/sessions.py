"""``InMemorySessionManager``: the ``SessionManager`` protocol in a dict, for tests and benches."""

from __future__ import annotations

import uuid
from dataclasses import replace

from aptix.db.types import utc_now
from aptix.errors import NotFoundError
from aptix.modes.catalog import ModeCatalog
from aptix.results import InvokeResult
from aptix.sessions.manager import Unchecked, workflow_changed_message
from aptix.sessions.models import AgentSession, ModeHistoryEntry

__all__ = ["InMemorySessionManager"]


class InMemorySessionManager:
    """Sessions kept in memory with the same org scoping and mode checks as the SQL store."""

    def __init__(self, modes: ModeCatalog) -> None:
        self._modes = modes
        self._sessions: dict[str, AgentSession] = {}

    async def create_session(
        self,
        *,
        org: str,
        user: str,
        mode: str | None = None,
        title: str | None = None,
        parent_session_id: str | None = None,
    ) -> InvokeResult[AgentSession]:
        """Create a session (default mode when ``mode`` is None)."""
        key = mode or self._modes.default_mode.key
        try:
            self._modes.get_mode(key)
        except NotFoundError as exc:
            return InvokeResult.from_error(str(exc))
        parent = await self.get_session(parent_session_id, org) if parent_session_id else None
        if parent_session_id and parent is None:
            return InvokeResult.from_error(f"Unknown session '{parent_session_id}'.")
        workflow = parent.active_workflow_id if parent is not None else None  # inherited
        now = utc_now()
        session = AgentSession(
            uuid.uuid4().hex, org, user, title, key, None, now, (), parent_session_id, workflow,
            now, now, 1,
        )  # fmt: skip
        self._sessions[session.id] = session
        return InvokeResult.create(session)

    async def get_session(self, session_id: str, org: str) -> AgentSession | None:
        """The session, or None when it does not exist in ``org``."""
        session = self._sessions.get(session_id)
        return session if session is not None and session.org == org else None

    async def list_sessions(
        self, org: str, user: str, *, limit: int = 50, offset: int = 0
    ) -> list[AgentSession]:
        """The caller's sessions, newest first."""
        mine = [s for s in self._sessions.values() if s.org == org and s.user == user]
        mine.sort(key=lambda s: s.updated_at, reverse=True)
        return mine[offset : offset + limit]

    async def set_session_mode(
        self, session_id: str, mode: str, reason: str, org: str, user: str
    ) -> InvokeResult[AgentSession]:
        """Change the mode and append a history entry."""
        try:
            self._modes.get_mode(mode)
        except NotFoundError as exc:
            return InvokeResult.from_error(str(exc))
        session = await self.get_session(session_id, org)
        if session is None:
            return InvokeResult.from_error(f"Unknown session '{session_id}'.")
        now = utc_now()
        entry = ModeHistoryEntry(session.mode, mode, reason, now, user)
        updated = replace(
            session,
            mode=mode,
            mode_reason=reason,
            mode_set_at=now,
            mode_history=(*session.mode_history, entry),
            updated_at=now,
            version=session.version + 1,
        )
        self._sessions[session_id] = updated
        return InvokeResult.create(updated)

    async def branch_session(
        self, session_id: str, mode: str, reason: str, org: str, user: str
    ) -> InvokeResult[AgentSession]:
        """Change the mode and create a child in it (nothing can fail in between here)."""
        changed = await self.set_session_mode(session_id, mode, reason, org, user)
        if changed.result is None:
            return changed
        return await self.create_session(
            org=org, user=user, mode=mode, parent_session_id=session_id
        )

    async def set_active_workflow(
        self,
        session_id: str,
        workflow_id: str | None,
        org: str,
        user: str,
        *,
        expected: str | Unchecked | None = Unchecked.ANY,
    ) -> InvokeResult[AgentSession]:
        """Set, or clear with None, the active workflow (if it is still ``expected``)."""
        session = await self.get_session(session_id, org)
        if session is None:
            return InvokeResult.from_error(f"Unknown session '{session_id}'.")
        if not isinstance(expected, Unchecked) and session.active_workflow_id != expected:
            return InvokeResult.from_error(
                workflow_changed_message(session.active_workflow_id, expected)
            )
        updated = replace(
            session,
            active_workflow_id=workflow_id,
            updated_at=utc_now(),
            version=session.version + 1,
        )
        self._sessions[session_id] = updated
        return InvokeResult.create(updated)
