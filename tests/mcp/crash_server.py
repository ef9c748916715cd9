"""An MCP server (the SDK's ``MCPServer``) over streamable HTTP whose ``crash`` dies mid-call.

``python crash_server.py PORT MARKER``: ``crash`` writes ``MARKER`` (the call took effect),
then the process exits while the call's event stream is open; ``echo`` answers.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("crashing")


@server.tool()
async def crash(text: str) -> str:
    """Records ``text`` in the marker file, then kills the server process."""
    await asyncio.to_thread(Path(sys.argv[2]).write_text, text, encoding="utf-8")
    await asyncio.sleep(0.3)  # the answer's event stream is open by now
    os._exit(3)


@server.tool()
def echo(text: str) -> str:
    """Echoes the text back."""
    return text


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
