"""A stdio MCP server whose one tool has its own ``sessionId`` argument; it echoes its arguments."""

from __future__ import annotations

import json

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("own")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo(text: str, sessionId: str) -> str:
    """Echoes its arguments as JSON."""
    return json.dumps({"text": text, "sessionId": sessionId})


if __name__ == "__main__":
    server.run("stdio")
