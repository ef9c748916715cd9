"""Who may use a session: the owner rule every surface applies."""

from __future__ import annotations

from aptix.sessions.manager import SessionManager
from aptix.sessions.models import AgentSession

__all__ = ["is_owner", "owned_session"]


def is_owner(session: AgentSession | None, org: str, user: str) -> bool:
    """THE owner rule: the session belongs to ``org`` AND ``user``."""
    return session is not None and session.org == org and session.user == user


async def owned_session(
    sessions: SessionManager, session_id: str, org: str, user: str
) -> AgentSession | None:
    """THE owner check: the session when it belongs to ``org`` AND ``user``, else None.

    Another org's or another user's session looks exactly like a missing one.
    """
    session = await sessions.get_session(session_id, org)
    return session if is_owner(session, org, user) else None
