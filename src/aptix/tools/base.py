"""``AgentTool``: the abstract base every Aptix tool implements (AGN-005 §4, TUL-011 §2)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from aptix.results import InvokeResult
from aptix.tools.context import AgentToolExecutionContext

__all__ = ["AgentTool", "is_idempotent"]


class AgentTool(ABC):
    """A tool the model can call.

    Subclasses declare ``TOOL_NAME`` and ``TOOL_USAGE_METADATA`` as plain class constants,
    implement ``schema()`` as a classmethod and ``execute()`` as a coroutine, and receive
    their services through ``__init__`` from the composition root.
    """

    TOOL_NAME: ClassVar[str]
    TOOL_USAGE_METADATA: ClassVar[str]

    #: True when the tool's result is final; False when a client performs the final step.
    #: A subclass may declare it as a property (AGN-005's form); the registry reads it from the
    #: built instance, so always ask ``AgentToolRegistry.server_final``, not the class.
    is_fully_executed_on_server: ClassVar[bool] = True

    #: MCP-style hints (``title``, ``readOnlyHint``, ``destructiveHint``, ``idempotentHint``,
    #: ``openWorldHint``) shown in listings and to MCP clients; None when unknown.
    #: ``idempotentHint`` or ``readOnlyHint`` true makes the tool idempotent (see
    #: :func:`is_idempotent`).
    TOOL_ANNOTATIONS: ClassVar[dict[str, Any] | None] = None

    #: The JSON schema of the result object, when known (MCP ``outputSchema``).
    TOOL_OUTPUT_SCHEMA: ClassVar[dict[str, Any] | None] = None

    @property
    def name(self) -> str:
        """The stable tool name (``TOOL_NAME``)."""
        return self.TOOL_NAME

    @classmethod
    @abstractmethod
    def schema(cls) -> dict[str, Any]:
        """Return the flat function-tool schema (TUL-011 §4)."""

    @abstractmethod
    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        """Run the tool; expected failures are returned, never raised."""


def is_idempotent(tool: type[AgentTool] | AgentTool) -> bool:
    """Whether running a call of ``tool`` twice does no more than running it once.

    Only such a tool's call is run again after a crash left its outcome unknown; every other
    call runs at most once. Declared by ``idempotentHint`` or ``readOnlyHint`` in
    ``TOOL_ANNOTATIONS`` (``@aptix.tool(idempotent=True)``, MCP annotations).
    """
    hints = tool.TOOL_ANNOTATIONS or {}
    return hints.get("idempotentHint") is True or hints.get("readOnlyHint") is True
