"""Who may use a session, and the tool context every surface builds from it."""

from __future__ import annotations

from aptix.errors import NotFoundError
from aptix.sessions.manager import SessionManager
from aptix.sessions.models import AgentSession
from aptix.tools.context import AgentToolExecutionContext, context_for

__all__ = ["is_owner", "owned_session", "session_tool_context"]


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


async def session_tool_context(
    sessions: SessionManager,
    *,
    org: str,
    user: str,
    role: str,
    session_id: str | None = None,
    conversation_id: str | None = None,
) -> AgentToolExecutionContext:
    """The tool context for a call outside a model turn (HTTP, CLI, MCP).

    With ``session_id`` the session must be the caller's (:class:`NotFoundError` otherwise),
    and its stored mode and active workflow go into the context.
    """
    session = None
    if session_id is not None:
        session = await owned_session(sessions, session_id, org, user)
        if session is None:
            raise NotFoundError(f"Unknown session '{session_id}'.")
    return context_for(session, org=org, user=user, role=role, conversation_id=conversation_id)
