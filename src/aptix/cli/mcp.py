"""``aptix mcp``: the server-final tools over MCP on stdin/stdout."""

from __future__ import annotations

from aptix.cli.runtime import config_failed, run_leaving_strays


def mcp() -> None:
    """Serve the server-final tools to an MCP client over stdio (for IDEs and desktop apps)."""
    from aptix.errors import ConfigurationError
    from aptix.mcp.server import run_stdio

    try:
        run_leaving_strays(run_stdio())  # a tool left running at its limit is not waited for
    except ConfigurationError as exc:
        config_failed(exc)
    except KeyboardInterrupt:
        pass
