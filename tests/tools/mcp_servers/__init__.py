"""Where the MCP servers the tests start live; a missing one fails the test, never skips it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

FLAKY = str(Path(__file__).with_name("flaky.py"))


def console_script(name: str) -> str:
    """A server installed by the ``test`` extra, next to this Python (the venv's bin)."""
    path = Path(sys.executable).parent / name
    assert path.exists(), f"{name} is not installed: pip install -e '.[test]'"
    return str(path)


def npm_server(name: str) -> str:
    """A server installed from npm (scripts/check installs it globally)."""
    found = shutil.which(name)
    assert found, f"{name} is not installed: npm install -g @modelcontextprotocol/server-everything"
    return found


def time_server(**extra: Any) -> dict[str, Any]:
    """``mcp-server-time`` as an ``mcp_servers`` entry."""
    return {"command": console_script("mcp-server-time"), **extra}


def flaky_server(log: Path | None = None, **extra: Any) -> dict[str, Any]:
    """The misbehaving test server as an ``mcp_servers`` entry."""
    env = {"FLAKY_LOG": str(log)} if log else None
    return {"command": sys.executable, "args": [FLAKY], "env": env, **extra}


def late_server(flag: Path, **extra: Any) -> dict[str, Any]:
    """The test server, down (exits at once) until the file ``flag`` exists."""
    start = (
        "import os, runpy, sys\n"
        f"if not os.path.exists({str(flag)!r}): sys.exit(1)\n"
        f"runpy.run_path({FLAKY!r}, run_name='__main__')\n"
    )
    return {"command": sys.executable, "args": ["-c", start], **extra}
