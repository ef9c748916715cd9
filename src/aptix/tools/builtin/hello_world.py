"""``agent_hello_world``: the TUL-011 §6 reference tool."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from aptix.results import InvokeResult
from aptix.tools.args import ToolArgs
from aptix.tools.builtin.base import BuiltinTool, CallResult, Refusal, hints
from aptix.tools.context import AgentToolExecutionContext
from aptix.tools.signature import output_schema_of

__all__ = ["HelloWorldTool"]


class _Args(ToolArgs):
    name: str | None = Field(None, description="The name of the person to greet.")


class _Result(CallResult):
    message: str


class HelloWorldTool(BuiltinTool[_Args, _Result]):
    """Greets a person by name; the smallest compliant tool."""

    TOOL_NAME = "agent_hello_world"
    TOOL_USAGE_METADATA = (
        "Call this tool when the user asks to be greeted or welcomed. "
        "Pass the user's name; the tool returns a personalised greeting."
    )
    TOOL_OUTPUT_SCHEMA = output_schema_of(_Result)
    TOOL_ANNOTATIONS = hints("Hello world", read_only=True, idempotent=True)

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """Return the function-tool schema."""
        description = "Creates a friendly greeting using the user's name."
        return cls.function_schema(description, required=("name",))

    async def run(self, args: _Args, context: AgentToolExecutionContext) -> _Result | Refusal:
        """Greet the named person."""
        name = (args.name or "").strip()
        if not name:
            return InvokeResult.from_error("HelloWorldTool requires a non-empty 'name' string.")
        return _Result(
            message=f"Hello, {name}! Welcome to Aptix.",
        )
