"""Tool-call inputs: the execution context and the record of one call (``AgentToolCall``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["AgentToolCall", "AgentToolExecutionContext"]


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

    def log_pairs(self) -> tuple[tuple[str, str], ...]:
        """The ids every log record of a tool call carries (AGN-005 §7)."""
        return (
            ("SessionId", self.session_id or ""),
            ("ConversationId", self.conversation_id or ""),
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
