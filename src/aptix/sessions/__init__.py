"""Server-owned agent sessions: mode, mode history, active workflow, lineage."""

from aptix.sessions.manager import SessionManager
from aptix.sessions.models import AgentSession, ModeHistoryEntry

__all__ = ["AgentSession", "ModeHistoryEntry", "SessionManager"]
