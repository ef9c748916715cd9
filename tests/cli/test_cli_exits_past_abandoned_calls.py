"""``aptix tools call`` and ``aptix mcp`` end once they answered, past calls they abandoned.

A sync tool that never returns holds its thread forever, and an async one that swallows every
cancellation never ends: neither may keep the command from exiting.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

TOOLS = '''
import asyncio
import threading

import aptix


@aptix.tool(usage="Never returns.")
def forever() -> str:
    """Waits on an event nobody sets."""
    threading.Event().wait()
    return "never"


@aptix.tool(usage="Swallows cancellation.")
async def swallow() -> str:
    """Sleeps, and goes on sleeping whenever it is cancelled."""
    while True:
        try:
            await asyncio.sleep(100)
        except asyncio.CancelledError:
            pass
'''

APTIX = str(Path(sys.executable).parent / "aptix")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "stuck_tools.py"
    path.write_text(TOOLS)
    return {
        **os.environ,
        "APTIX_DATA_DIR": str(tmp_path),
        "APTIX_TOOL_MODULES": str(path),
        "APTIX_TOOL_TIMEOUT_SECONDS": "1",
    }


@pytest.mark.parametrize("name", ["forever", "swallow"])
def test_tools_call_exits_once_it_printed_the_answer(env: dict[str, str], name: str) -> None:
    started = time.monotonic()
    done = subprocess.run(
        [APTIX, "tools", "call", name, "{}"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stderr
    assert f"error: The tool '{name}' did not finish within 1 seconds" in done.stderr
    assert time.monotonic() - started < 30


def _line(payload: dict[str, object]) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", **payload}) + "\n").encode()


def test_mcp_exits_when_its_client_closes_stdin(env: dict[str, str]) -> None:
    hello = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    }
    call = {"name": "forever", "arguments": {}}
    with subprocess.Popen(
        [APTIX, "mcp"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as server:
        assert server.stdin is not None
        assert server.stdout is not None
        try:
            server.stdin.write(_line({"id": 1, "method": "initialize", "params": hello}))
            server.stdin.write(_line({"method": "notifications/initialized"}))
            server.stdin.write(_line({"id": 2, "method": "tools/call", "params": call}))
            server.stdin.flush()
            answers = [json.loads(server.stdout.readline()) for _ in range(2)]
            assert answers[1]["id"] == 2
            assert answers[1]["result"]["isError"] is True
            server.stdin.close()  # the client goes away
            assert server.wait(timeout=30) == 0
        finally:
            if server.poll() is None:
                server.kill()
