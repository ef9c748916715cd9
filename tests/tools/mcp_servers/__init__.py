"""Where the MCP servers the tests start live; a missing one fails the test, never skips it."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

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


EVERYTHING = "@modelcontextprotocol/server-everything"


@contextlib.contextmanager
def everything_over_http() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """server-everything over streamable HTTP on a free port: its ``/mcp`` URL and process."""
    npm_server("mcp-server-everything")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        ["npx", "--no-install", EVERYTHING, "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # npx starts the server as its child: its own process group lets the group be ended,
        # or the server outlives the test holding its port.
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.2)
        else:
            pytest.fail("server-everything did not start listening within 60 s")
        yield url, process
    finally:
        # Already gone when the server failed to start or a test ended it: nothing to end.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


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


def listed_server(
    folder: Path, tools: str, log: Path | None = None, **extra: Any
) -> dict[str, Any]:
    """``listed.py`` as an ``mcp_servers`` entry: it lists ``tools`` (a JSON array's text)."""
    listing = folder / "tools.json"
    listing.write_text(tools, encoding="utf-8")
    args = [str(Path(__file__).with_name("listed.py")), str(listing), *([str(log)] if log else [])]
    return {"command": sys.executable, "args": args, **extra}
