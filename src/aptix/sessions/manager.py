"""``SessionManager``: what the tools and the reasoner need from the session store."""

from __future__ import annotations

from enum import Enum
from typing import Protocol

from aptix.results import InvokeResult
from aptix.sessions.models import AgentSession

__all__ = ["SessionManager", "Unchecked", "workflow_changed_message"]


class Unchecked(Enum):
    """``set_active_workflow``'s ``expected`` when it compares nothing: set it whatever it is."""

    ANY = "any"


def workflow_changed_message(active: str | None, expected: str | None) -> str:
    """The refusal of a compare-and-set on a session's active workflow that lost a race."""

    def name(workflow_id: str | None) -> str:
        return f"'{workflow_id}'" if workflow_id else "none"

    return (
        f"The session's active workflow changed meanwhile (it is {name(active)}, not "
        f"{name(expected)}): nothing was changed."
    )


class SessionManager(Protocol):
    """Session persistence, always scoped to the caller's org.

    Another org's session id behaves exactly like a missing one. Expected failures (unknown
    session, unknown mode) come back as failed results; only infrastructure errors raise.
    """

    async def create_session(
        self,
        *,
        org: str,
        user: str,
        mode: str | None = None,
        title: str | None = None,
        parent_session_id: str | None = None,
    ) -> InvokeResult[AgentSession]:
        """Create a session (default mode when ``mode`` is None).

        A child (``parent_session_id``) starts under its parent's active workflow.
        """
        ...

    async def get_session(self, session_id: str, org: str) -> AgentSession | None:
        """The session, or None when it does not exist in ``org``."""
        ...

    async def list_sessions(
        self, org: str, user: str, *, limit: int = 50, offset: int = 0
    ) -> list[AgentSession]:
        """The caller's sessions, newest first."""
        ...

    async def set_session_mode(
        self, session_id: str, mode: str, reason: str, org: str, user: str
    ) -> InvokeResult[AgentSession]:
        """Change the mode and append a history entry (TUL-007 §3.5)."""
        ...

    async def branch_session(
        self, session_id: str, mode: str, reason: str, org: str, user: str
    ) -> InvokeResult[AgentSession]:
        """Change the mode and create a child session in it, atomically; returns the child.

        The child inherits the session's active workflow: a branch never escapes it.
        """
        ...

    async def set_active_workflow(
        self,
        session_id: str,
        workflow_id: str | None,
        org: str,
        user: str,
        *,
        expected: str | Unchecked | None = Unchecked.ANY,
    ) -> InvokeResult[AgentSession]:
        """Set (or clear, with None) the session's active workflow.

        A compare-and-set when ``expected`` is given: only while the active workflow is still
        ``expected`` (None: none is active), else a failed result and nothing changes.
        """
        ...
