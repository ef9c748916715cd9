"""The server-final tools over the Model Context Protocol (official ``mcp`` package)."""

from aptix.mcp.server import build_mcp_server, run_stdio

__all__ = ["build_mcp_server", "run_stdio"]
