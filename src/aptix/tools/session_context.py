"""The tool context every surface builds from a caller's session (HTTP, CLI, MCP)."""

from __future__ import annotations

from aptix.errors import NotFoundError
from aptix.sessions.access import owned_session
from aptix.sessions.manager import SessionManager
from aptix.tools.context import AgentToolExecutionContext, context_for

__all__ = ["session_tool_context"]


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
