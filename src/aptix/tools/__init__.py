"""The tool contract, the registry, the executor and the built-in tools."""

from aptix.tools.args import ToolArgs, ToolResult, function_schema, parse_arguments
from aptix.tools.base import AgentTool
from aptix.tools.context import AgentToolCall, AgentToolExecutionContext
from aptix.tools.executor import AgentToolExecutor
from aptix.tools.registry import AgentToolRegistry

__all__ = [
    "AgentTool",
    "AgentToolCall",
    "AgentToolExecutionContext",
    "AgentToolExecutor",
    "AgentToolRegistry",
    "ToolArgs",
    "ToolResult",
    "function_schema",
    "parse_arguments",
]
