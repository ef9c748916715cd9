"""A stdio MCP server (the SDK's ``MCPServer``) that outlives its client, as a busy one does.

Run as a script: ``python lingering_mcp.py <pid file>``. It appends its process id to the pid
file, serves until its client is gone (stdin at end of file), then waits for a signal instead
of exiting, as a server still running a call (or one that ignores end of file) would.
"""

from __future__ import annotations

import os
import signal
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("linger")


@server.tool()
def ping() -> str:
    """Answers pong."""
    return "pong"


if __name__ == "__main__":
    with open(sys.argv[1], "a") as pids:
        pids.write(f"{os.getpid()}\n")
    try:
        server.run("stdio")
    finally:
        signal.pause()
