"""The crash matrix's stdio MCP server (the SDK's ``MCPServer``): one destructive, counted tool.

Run as a script: ``python crash_mcp.py``, with ``CRASH_DIR`` set (see crash_gate.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

sys.path.insert(0, str(Path(__file__).parent))
from crash_gate import gate, record_run

server = MCPServer("vault")


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
async def wipe(target: str) -> str:
    """Wipes the target (a side effect: one line in a file per run)."""
    record_run(target)
    await gate("approved_runs", target)
    return f"wiped {target}"


if __name__ == "__main__":
    server.run("stdio")
