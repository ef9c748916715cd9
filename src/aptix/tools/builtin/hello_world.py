"""``agent_hello_world``: the TUL-011 §6 reference tool."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from aptix.logger import AdminLogger
from aptix.results import InvokeResult
from aptix.tools.args import ToolArgs, ToolResult, function_schema, parse_arguments
from aptix.tools.base import AgentTool
from aptix.tools.context import AgentToolExecutionContext
from aptix.tools.signature import output_schema_of

__all__ = ["HelloWorldTool"]


class _Args(ToolArgs):
    name: str | None = Field(None, description="The name of the person to greet.")


class _Result(ToolResult):
    message: str
    conversation_id: str | None
    session_id: str | None


class HelloWorldTool(AgentTool):
    """Greets a person by name; the smallest compliant tool."""

    TOOL_NAME = "agent_hello_world"
    TOOL_USAGE_METADATA = (
        "Call this tool when the user asks to be greeted or welcomed. "
        "Pass the user's name; the tool returns a personalised greeting."
    )
    is_fully_executed_on_server = True
    TOOL_OUTPUT_SCHEMA = output_schema_of(_Result)
    TOOL_ANNOTATIONS: ClassVar[dict[str, Any] | None] = {
        "title": "Hello world",
        "readOnlyHint": True,
        "idempotentHint": True,
        "openWorldHint": False,
    }

    def __init__(self, logger: AdminLogger) -> None:
        self._logger = logger

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """Return the function-tool schema."""
        return function_schema(
            cls.TOOL_NAME,
            "Creates a friendly greeting using the user's name.",
            _Args,
            required=("name",),
        )

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        """Greet the named person."""
        parsed = parse_arguments(_Args, arguments_json)
        if parsed.result is None:
            return InvokeResult(errors=parsed.errors)
        name = (parsed.result.name or "").strip()
        if not name:
            return InvokeResult.from_error("HelloWorldTool requires a non-empty 'name' string.")
        result = _Result(
            message=f"Hello, {name}! Welcome to Aptix.",
            conversation_id=context.conversation_id,
            session_id=context.session_id,
        )
        return InvokeResult.create(result.to_json())
