"""A small MCP server (the SDK's ``MCPServer``) whose tools misbehave on request, over stdio.

Run as a script: ``python flaky.py`` (``python flaky.py http PORT`` serves streamable HTTP on
127.0.0.1). ``FLAKY_LOG`` names a file that records each call.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, ToolAnnotations
from pydantic import BaseModel

server = MCPServer("flaky")


def _record(name: str) -> None:
    log = os.environ.get("FLAKY_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(name + "\n")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo(text: str) -> str:
    """Echoes the text back. [bold red]markup[/] stays text."""
    _record("echo")
    return text


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
def delete_everything(target: str) -> str:
    """Deletes the target."""
    _record("delete_everything")
    return f"deleted {target}"


@server.tool()
def crash() -> str:
    """Kills the server process."""
    _record("crash")
    os._exit(3)


@server.tool()
async def hang() -> str:
    """Never answers."""
    _record("hang")
    await asyncio.sleep(3600)
    return "late"


@server.tool()
async def slow(text: str, seconds: float) -> str:
    """Answers with the text after ``seconds``; records its start and its end."""
    _record(f"slow-start {text}")
    await asyncio.sleep(seconds)
    _record(f"slow-end {text}")
    return text


@server.tool()
async def block(seconds: float) -> str:
    """Blocks the server's event loop for ``seconds``: nothing else is answered meanwhile."""
    _record("block")
    time.sleep(seconds)  # noqa: ASYNC251 (blocking the loop is the point)
    return "unblocked"


@server.tool()
def refuse(text: str) -> str:
    """Answers with a JSON-RPC error (invalid params), not a tool result."""
    _record("refuse")
    raise MCPError(code=INVALID_PARAMS, message=f"refused {text}")


@server.tool()
def huge() -> str:
    """Answers with ten megabytes."""
    _record("huge")
    return "x" * 10_000_000


@server.tool()
async def malformed(ctx: Context) -> str:
    """Answers with a result that is not an MCP tool result, then nothing."""
    _record("malformed")
    reply = {"jsonrpc": "2.0", "id": ctx.request_id, "result": {"content": 5}}
    os.write(1, (json.dumps(reply) + "\n").encode())
    await asyncio.sleep(3600)
    return "never"


@server.tool(name="weird.name/x")
def weird() -> str:
    """A name with characters outside the pattern."""
    return "ok"


@server.tool(name="hello_world")
def hello_world() -> str:
    """Says hi."""
    return "hi"


def late(text: str) -> str:
    """A read-only tool the server adds while it runs."""
    _record("late")
    return f"late {text}"


def late_write(text: str) -> str:
    """An unannotated (so destructive) tool the server adds while it runs."""
    _record("late_write")
    return f"wrote {text}"


def late_too_long() -> str:
    """A tool whose prefixed name is over 64 characters."""
    return "never offered"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def grow(ctx: Context) -> str:
    """Adds three tools and announces it (``notifications/tools/list_changed``)."""
    server.add_tool(late, annotations=ToolAnnotations(readOnlyHint=True))
    server.add_tool(late_write)
    server.add_tool(late_too_long, name="late_" + "x" * 60)
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def shrink(ctx: Context, name: str) -> str:
    """Removes the tool ``name`` and announces it."""
    server.remove_tool(name)
    await ctx.session.send_tool_list_changed()
    return f"removed {name}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def reword(ctx: Context, description: str) -> str:
    """Gives the tool ``late`` a new description and announces it."""
    server.remove_tool("late")
    server.add_tool(late, description=description, annotations=ToolAnnotations(readOnlyHint=True))
    await ctx.session.send_tool_list_changed()
    return "reworded"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def recase(ctx: Context) -> str:
    """Renames ``hello_world`` to ``Hello_World``, a change of case only, and announces it."""
    server.remove_tool("hello_world")
    server.add_tool(hello_world, name="Hello_World")
    await ctx.session.send_tool_list_changed()
    return "recased"


class Node(BaseModel):
    """A tree node: a recursive type, which function schemas cannot express."""

    label: str
    children: list[Node] = []


@server.tool()
def tree(root: Node) -> str:
    """Takes a recursive argument."""
    return root.label


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
