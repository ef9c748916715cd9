"""A streamable-HTTP MCP server that is down: its calls never reached it, so they failed."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.tools import AgentToolCall
from tests.tools.test_mcp_concurrent_calls import _serve_http


async def test_calls_to_a_stopped_http_server_fail_and_are_not_unknown(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = await asyncio.to_thread(_serve_http, port)
    servers = {"web": {"url": f"http://127.0.0.1:{port}/mcp", "approval": "never"}}
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, mcp_servers=servers)
    try:
        async with open_runtime(settings) as runtime:

            async def echo(text: str) -> AgentToolCall:
                call = AgentToolCall(f"c-{text}", "web_echo", json.dumps({"text": text}))
                return await runtime.executor.execute(call, runtime.tool_context())

            first = await echo("one")
            process.terminate()
            await asyncio.to_thread(process.wait, 10)
            # Nothing listens any more: connecting is refused, the request never leaves.
            after = [await echo("two"), await echo("three")]
    finally:
        process.kill()
        await asyncio.to_thread(process.wait, 10)
    assert first.outcome == "succeeded", first.error_message
    for call in after:
        assert call.outcome == "failed", call.error_message
        assert "may have taken effect" not in (call.error_message or "")
        assert "ConnectError" in (call.error_message or ""), call.error_message
