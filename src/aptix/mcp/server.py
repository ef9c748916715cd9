"""``build_mcp_server``: every server-final tool as an MCP tool, run by the same executor."""

from __future__ import annotations

import json
import sys
from typing import Any, cast

import anyio
from mcp import types
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.lowlevel import Server

from aptix import __version__
from aptix.api.outage import OutageLog
from aptix.db.outage import DATABASE_UNAVAILABLE, DatabaseUnavailable, is_database_outage
from aptix.errors import NotFoundError
from aptix.nul import NUL_REFUSED, SURROGATE_REFUSED, find_nul, find_surrogate
from aptix.runtime import Runtime
from aptix.settings import AptixSettings
from aptix.tools.base import AgentTool

__all__ = ["build_mcp_server", "run_stdio"]


def build_mcp_server(
    runtime: Runtime, *, org: str = "local", user: str = "local", role: str = "admin"
) -> Server[Any]:
    """An MCP server exposing the runtime's server-final tools.

    Calls run as (``org``, ``user``, ``role``), the local admin by default, or as the caller
    whose API key authenticated the HTTP request. Client-final tools are left out: an MCP
    client cannot post their results back. A call's optional ``sessionId`` argument selects a
    session, which must belong to the caller (org and user), exactly as over HTTP.
    """
    from aptix.api.auth import Caller, caller_from_token

    registry = runtime.registry
    outages = OutageLog(tag="[Mcp_Database__Unavailable]", answer="answering tool errors")
    default_caller = Caller(org, user, role)

    def tools() -> list[types.Tool]:
        listed = []
        for schema in registry.schemas():
            tool_cls = registry.get_tool_type(schema["name"])
            if tool_cls is None or not tool_cls.is_fully_executed_on_server:
                continue
            listed.append(_mcp_tool(schema, tool_cls))
        return listed

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools())

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        caller = caller_from_token(get_access_token()) or default_caller
        if (refusal := await runtime.quotas.request(caller.key_id)) is not None:
            return _error(refusal.message)  # a limit over MCP is a tool error
        # Serve what other processes published (stdio has no HTTP middleware to do it).
        await runtime.workflows.sync.check()
        arguments = dict(params.arguments or {})
        if (nul := find_nul(arguments)) is not None:
            return _error(f"{NUL_REFUSED} (found in '{nul}').")
        if (lone := find_surrogate(arguments)) is not None:
            return _error(f"{SURROGATE_REFUSED} (found in '{lone}').")
        session_id = arguments.pop("sessionId", None)
        tool_cls = registry.get_tool_type(params.name)
        if tool_cls is None or not tool_cls.is_fully_executed_on_server:
            return _error(f"Unknown tool '{params.name}'.")
        try:
            context = await runtime.session_context(
                org=caller.org,
                user=caller.user,
                role=caller.role,
                session_id=str(session_id) if session_id is not None else None,
            )
            outcome = await runtime.executor.invoke(params.name, json.dumps(arguments), context)
        except NotFoundError as exc:
            return _error(str(exc))
        except Exception as exc:
            if not is_database_outage(exc):
                raise
            unavailable: BaseException | None = exc
        else:
            unavailable = (
                DatabaseUnavailable(DATABASE_UNAVAILABLE)
                if outcome.error_message == DATABASE_UNAVAILABLE
                else None
            )
        if unavailable is not None:
            outages.failed(unavailable, f"tools/call {params.name}")
            return _error(DATABASE_UNAVAILABLE)
        if outcome.result is None:
            return _error(outcome.error_message or "The tool call failed.")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=outcome.result)],
            structuredContent=_structured(outcome.result),
        )

    return Server(
        "aptix",
        version=__version__,
        instructions="Aptix tools. Each tool's description says when to call it.",
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


#: Documented in docs/mcp.md: every tool takes it, so it is part of every input schema.
SESSION_ID_PROPERTY = {
    "type": "string",
    "description": "Optional: the id of one of your Aptix sessions to run the tool in "
    "(its mode and active workflow apply).",
}


def _mcp_tool(schema: dict[str, Any], tool_cls: type[AgentTool]) -> types.Tool:
    """The MCP listing of one tool: input schema with ``sessionId``, annotations, output."""
    params = schema["parameters"]
    properties = dict(params.get("properties", {}))
    properties.setdefault("sessionId", SESSION_ID_PROPERTY)
    hints = dict(tool_cls.TOOL_ANNOTATIONS or {})
    title = hints.get("title")
    return types.Tool(
        name=schema["name"],
        title=title if isinstance(title, str) else None,
        description=f"{schema['description']}\n\n{tool_cls.TOOL_USAGE_METADATA}",
        input_schema={**params, "properties": properties},
        output_schema=tool_cls.TOOL_OUTPUT_SCHEMA,
        annotations=types.ToolAnnotations.model_validate(hints) if hints else None,
    )


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], isError=True
    )


def _structured(text: str) -> Any:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


async def run_stdio(settings: AptixSettings | None = None) -> None:
    """Open the runtime and serve MCP over stdin/stdout until the client disconnects."""
    from mcp.server.stdio import stdio_server

    from aptix.mcp.stdio import answering_bad_lines, capped_lines
    from aptix.runtime import open_runtime

    async with open_runtime(settings) as runtime:
        server = build_mcp_server(runtime)
        limit = runtime.settings.max_body_bytes
        # The SDK reads whole lines, however long: ours are capped (any async line iterable
        # serves as its stdin).
        stdin = cast("anyio.AsyncFile[str]", capped_lines(sys.stdin.buffer, limit))
        async with (
            stdio_server(stdin=stdin) as (read, write),
            answering_bad_lines(read, write, limit) as checked,
        ):
            await server.run(checked, write, server.create_initialization_options())
