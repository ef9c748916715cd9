"""``build_mcp_server``: every server-final tool as an MCP tool, run by the same executor."""

from __future__ import annotations

import json
from contextvars import ContextVar
from typing import Any

from mcp import types
from mcp.server.lowlevel import Server

from aptix.runtime import Runtime
from aptix.settings import AptixSettings

__all__ = ["build_mcp_server", "current_caller", "run_stdio"]


#: The caller of the current MCP request over HTTP (set by the API's auth wrapper).
current_caller: ContextVar[tuple[str, str] | None] = ContextVar("aptix_mcp_caller", default=None)


def build_mcp_server(runtime: Runtime, *, org: str = "local", user: str = "local") -> Server[Any]:
    """An MCP server exposing the runtime's server-final tools.

    Calls run as (``org``, ``user``), or as the HTTP caller when ``current_caller`` is set.
    Client-final tools are left out: an MCP client cannot post their results back. A call's
    optional ``sessionId`` argument selects a session, which must belong to the caller's org.
    """
    registry = runtime.registry
    default_caller = (org, user)

    def tools() -> list[types.Tool]:
        listed = []
        for schema in registry.schemas():
            tool_cls = registry.get_tool_type(schema["name"])
            if tool_cls is None or not tool_cls.is_fully_executed_on_server:
                continue
            listed.append(
                types.Tool(
                    name=schema["name"],
                    description=f"{schema['description']}\n\n{tool_cls.TOOL_USAGE_METADATA}",
                    inputSchema=schema["parameters"],
                )
            )
        return listed

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools())

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        org, user = current_caller.get() or default_caller
        arguments = dict(params.arguments or {})
        session_id = arguments.pop("sessionId", None)
        tool_cls = registry.get_tool_type(params.name)
        if tool_cls is None or not tool_cls.is_fully_executed_on_server:
            return _error(f"Unknown tool '{params.name}'.")
        if session_id is not None:
            session = await runtime.services.sessions.get_session(str(session_id), org)
            if session is None:
                return _error(f"Unknown session '{session_id}'.")
        context = runtime.tool_context(
            session_id=str(session_id) if session_id else None, org=org, user=user
        )
        outcome = await runtime.executor.invoke(params.name, json.dumps(arguments), context)
        if outcome.result is None:
            return _error(outcome.error_message or "The tool call failed.")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=outcome.result)],
            structuredContent=_structured(outcome.result),
        )

    return Server(
        "aptix",
        version="0.1.0",
        instructions="Aptix tools. Each tool's description says when to call it.",
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], isError=True
    )


def _structured(text: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


async def run_stdio(settings: AptixSettings | None = None) -> None:
    """Open the runtime and serve MCP over stdin/stdout until the client disconnects."""
    from mcp.server.stdio import stdio_server

    from aptix.runtime import open_runtime

    async with open_runtime(settings) as runtime:
        server = build_mcp_server(runtime)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
