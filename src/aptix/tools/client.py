"""Tools a client brings for one request: offered to the model, performed by the client.

An OpenAI-style client sends its own function tools with each request. Each becomes a
client-final tool for that turn only: the server checks that the model's arguments are a JSON
object and hands the call back, exactly like ``request_user_approval``. Unlike a deployment's
tools they are the client's declarations, so their schema is passed on as the client wrote it
(TUL-011's registration rules are for the deployment's own tools).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from aptix.logger import AdminLogger
from aptix.results import InvokeResult
from aptix.tools.base import AgentTool
from aptix.tools.context import AgentToolExecutionContext

__all__ = ["ClientToolSpec", "client_tool_class", "client_tool_classes"]

_NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}, "required": []}


@dataclass(frozen=True, slots=True)
class ClientToolSpec:
    """A function tool as the client declared it."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: dict(_NO_PARAMETERS))

    def schema(self) -> dict[str, Any]:
        """The function-tool schema offered to the model."""
        return {
            "type": "function",
            "name": self.name,
            "description": self.description or f"The client's tool '{self.name}'.",
            "parameters": self.parameters or dict(_NO_PARAMETERS),
        }


class _ClientTool(AgentTool):
    """Base of the per-request classes made by :func:`client_tool_class`."""

    is_fully_executed_on_server = False
    SPEC: ClassVar[ClientToolSpec]

    def __init__(self, logger: AdminLogger | None = None) -> None:
        self._logger = logger

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """The client's declaration."""
        return cls.SPEC.schema()

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        """Check the arguments are a JSON object and hand the call to the client."""
        try:
            arguments = json.loads(arguments_json or "{}")
        except (ValueError, RecursionError):
            return InvokeResult.from_error(
                f"The arguments of '{self.TOOL_NAME}' must be a JSON object; they are not JSON."
            )
        if not isinstance(arguments, dict):
            return InvokeResult.from_error(
                f"The arguments of '{self.TOOL_NAME}' must be a JSON object."
            )
        return InvokeResult.create(json.dumps(arguments))


def client_tool_class(spec: ClientToolSpec) -> type[AgentTool]:
    """A client-final tool class for one client-declared tool."""
    usage = spec.description or f"A tool the client performs: {spec.name}."
    return type(
        f"ClientTool_{spec.name}",
        (_ClientTool,),
        {"TOOL_NAME": spec.name, "TOOL_USAGE_METADATA": usage, "SPEC": spec},
    )


def client_tool_classes(specs: Sequence[ClientToolSpec]) -> list[type[AgentTool]]:
    """One class per spec."""
    return [client_tool_class(spec) for spec in specs]
