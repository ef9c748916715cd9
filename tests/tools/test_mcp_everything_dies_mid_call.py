"""The reference server-everything over streamable HTTP, killed mid-call: the call is unknown.

Its events carry ids, so when the answer stream is cut the SDK tries to resume it with a GET,
which the dead server refuses; the call's own request had reached the server all the same.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.tools import AgentToolCall
from tests.tools.mcp_servers import everything_over_http


@pytest.fixture
def everything() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """server-everything over streamable HTTP, and its process, for the test to kill."""
    with everything_over_http() as served:
        yield served


async def test_everything_killed_mid_call_leaves_the_call_unknown(
    tmp_path: Path, everything: tuple[str, subprocess.Popen[bytes]]
) -> None:
    url, process = everything
    servers = {"evh": {"url": url, "approval": "never", "timeout_seconds": 60}}
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, mcp_servers=servers)
    async with open_runtime(settings) as runtime:
        arguments = json.dumps({"duration": 8, "steps": 8})
        call = AgentToolCall("c-long", "evh_trigger-long-running-operation", arguments)
        running = asyncio.create_task(runtime.executor.execute(call, runtime.tool_context()))
        await asyncio.sleep(3)  # the server is running the call, its answer stream open
        assert not running.done()
        os.killpg(process.pid, signal.SIGKILL)  # a crash: npx and node alike
        started = time.monotonic()
        done = await running
        took = time.monotonic() - started
    assert done.outcome == "unknown", done.error_message
    message = done.error_message or ""
    assert "may have taken effect; check before retrying" in message
    assert "ConnectError" not in message
    assert took < 20, took  # the SDK's two resuming GETs, not the 60 s timeout
