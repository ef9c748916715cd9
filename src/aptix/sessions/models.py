"""The session as the rest of the runtime sees it: plain frozen dataclasses."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

__all__ = ["MAX_TITLE_LENGTH", "AgentSession", "ModeHistoryEntry"]

#: Longest session title: the width of ``sessions.title`` (``VARCHAR(500)``). PostgreSQL refuses
#: a longer one where SQLite keeps it, so HTTP and the CLI refuse it first.
MAX_TITLE_LENGTH = 500


@dataclass(frozen=True, slots=True)
class ModeHistoryEntry:
    """One mode change: from ``previous_mode`` to ``mode``, why, when and who asked."""

    previous_mode: str | None
    mode: str
    reason: str
    changed_at: datetime
    changed_by: str


@dataclass(frozen=True, slots=True)
class AgentSession:
    """A conversation owned by the server; ``id`` is 32 lowercase hex characters."""

    id: str
    org: str
    user: str
    title: str | None
    mode: str
    mode_reason: str | None
    mode_set_at: datetime | None
    mode_history: tuple[ModeHistoryEntry, ...]
    parent_session_id: str | None
    active_workflow_id: str | None
    created_at: datetime
    updated_at: datetime
    version: int
