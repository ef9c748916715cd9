"""``aptix mcp``: the server-final tools over MCP on stdin/stdout."""

from __future__ import annotations

import asyncio

from aptix.cli.runtime import config_failed


def mcp() -> None:
    """Serve the server-final tools to an MCP client over stdio (for IDEs and desktop apps)."""
    from aptix.errors import ConfigurationError
    from aptix.mcp.server import run_stdio

    try:
        asyncio.run(run_stdio())
    except ConfigurationError as exc:
        config_failed(exc)
    except KeyboardInterrupt:
        pass
