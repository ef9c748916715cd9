"""Tool-call inputs: the execution context and the record of one call (``AgentToolCall``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aptix.sessions.models import AgentSession

__all__ = ["AgentToolCall", "AgentToolExecutionContext", "context_for"]


@dataclass(frozen=True, slots=True)
class AgentToolExecutionContext:
    """Who is calling and where: always taken from the server's session, never from arguments."""

    session_id: str | None = None
    conversation_id: str | None = None
    org: str = ""
    user: str = ""
    mode: str | None = None
    active_workflow_id: str | None = None
    request: Any = field(default=None, compare=False)
    #: The caller's API key role: ``user``, ``author`` or ``admin`` (authoring rights).
    role: str = "user"
    #: ``"{turnId}:{callId}"`` for a call the model made: the same for every attempt of that
    #: call, so a tool (or an MCP server) can recognise a retry and not act twice. None for a
    #: call outside a model turn (HTTP invoke, CLI, MCP).
    idempotency_key: str | None = None

    def log_pairs(self) -> tuple[tuple[str, str], ...]:
        """The ids every log record of a tool call carries (AGN-005 §7)."""
        return (
            ("SessionId", self.session_id or ""),
            ("ConversationId", self.conversation_id or ""),
        )


def context_for(
    session: AgentSession | None,
    *,
    org: str,
    user: str,
    role: str,
    conversation_id: str | None = None,
    request: Any = None,
) -> AgentToolExecutionContext:
    """THE way a tool context is built: from the stored session, on every surface.

    The session's mode and active workflow (and with it the workflow guard) come along.

    The caller must already own ``session`` (see :func:`aptix.sessions.access.owned_session`).
    """
    return AgentToolExecutionContext(
        session_id=session.id if session is not None else None,
        conversation_id=conversation_id,
        org=org,
        user=user,
        mode=session.mode if session is not None else None,
        active_workflow_id=session.active_workflow_id if session is not None else None,
        request=request,
        role=role,
    )


@dataclass(slots=True)
class AgentToolCall:
    """One tool call requested by the model, and how the executor resolved it (AGN-005 §5).

    Treat it as a value: the executor returns a new instance and never changes the one it got.
    (Not frozen because a frozen dataclass costs more to build than the rest of a dispatch.)
    """

    call_id: str
    name: str
    arguments_json: str
    is_server_tool: bool = False
    was_executed: bool = False
    requires_client_execution: bool = False
    result_json: str | None = None
    error_message: str | None = None
    #: How the executor's run ended: ``succeeded``, ``failed``, ``timed_out`` or
    #: ``abandoned`` (left running in a thread at its time limit; it may still complete).
    #: None for a call that was not given to the executor.
    outcome: str | None = None
