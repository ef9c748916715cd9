"""Aptix as an MCP client: a server that dies mid-call, says too much, or answers unreadably.

Real server processes: the SDK's ``MCPServer`` over streamable HTTP (``crash_server.py``) and
a raw stdio server that answers what the SDK cannot read (``raw_server.py``).
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.tools import AgentToolCall

HERE = Path(__file__).parent
RAW = {"command": sys.executable, "args": [str(HERE / "raw_server.py")], "approval": "never"}


async def _call(runtime: Runtime, name: str, arguments: dict[str, Any]) -> AgentToolCall:
    call = AgentToolCall(f"c-{name}", name, json.dumps(arguments))
    return await runtime.executor.execute(call, runtime.tool_context())


def _serve_crashing(port: int, marker: Path, *options: str) -> subprocess.Popen[bytes]:
    """``crash_server.py`` over streamable HTTP, once it listens."""
    process = subprocess.Popen(
        [sys.executable, str(HERE / "crash_server.py"), str(port), str(marker), *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return process
        time.sleep(0.1)
    process.kill()
    pytest.fail("the crashing server did not listen within 30 s")


@pytest.mark.parametrize("options", [(), ("resumable",)], ids=["plain", "resumable"])
async def test_an_http_server_that_dies_mid_call_leaves_the_call_unknown(
    tmp_path: Path, options: tuple[str, ...]
) -> None:
    """Resumable: the SDK's GET to resume the cut stream is refused; the call is still unknown."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    marker = tmp_path / "took-effect"
    process = await asyncio.to_thread(_serve_crashing, port, marker, *options)
    servers = {"web": {"url": f"http://127.0.0.1:{port}/mcp", "approval": "never"}}
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, mcp_servers=servers)
    try:
        async with open_runtime(settings) as runtime:
            echoed = await _call(runtime, "web_echo", {"text": "hi"})
            crashed = await _call(runtime, "web_crash", {"text": "done"})
    finally:
        process.kill()
        await asyncio.to_thread(process.wait, 10)
    assert echoed.outcome == "succeeded", echoed.error_message
    # The request reached the server and took effect before its event stream was cut.
    assert marker.read_text(encoding="utf-8") == "done"
    assert crashed.outcome == "unknown", crashed.error_message
    assert "may have taken effect; check before retrying" in (crashed.error_message or "")


async def test_a_servers_words_are_cut_to_2000_characters_saying_so(tmp_path: Path) -> None:
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, mcp_servers={"raw": RAW})
    async with open_runtime(settings) as runtime:
        error = await _call(runtime, "raw_bigerror", {})
        reported = await _call(runtime, "raw_bigiserror", {})
    for call, letter in ((error, "E"), (reported, "F")):
        assert call.outcome == "failed"
        message = call.error_message or ""
        assert len(message) < 2_200, len(message)
        assert letter * 2_000 in message
        assert message.endswith(f"{letter}… (2998000 more characters not shown)"), message[-80:]


async def test_an_answer_that_is_not_json_rpc_fails_its_call_at_once_with_its_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    servers = {"raw": {**RAW, "timeout_seconds": 20}}
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, mcp_servers=servers)
    async with open_runtime(settings) as runtime:
        started = time.monotonic()
        call = await _call(runtime, "raw_nullresult", {})
        took = time.monotonic() - started
        after = await _call(runtime, "raw_fine", {})
    assert call.outcome == "failed", call.error_message
    assert took < 10, took  # not the 20 s timeout
    message = call.error_message or ""
    assert "MCP server 'raw' failed while calling 'nullresult'" in message
    assert "not a valid JSON-RPC response (result: " in message
    assert '"result": null' in message
    assert after.outcome == "succeeded"  # the session goes on
    logged = capsys.readouterr().err
    assert "Failed to parse JSONRPC message" not in logged
    assert "Traceback" not in logged


async def test_a_line_that_answers_no_call_is_one_warning_and_the_call_waits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    servers = {"raw": {**RAW, "timeout_seconds": 2}}
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, mcp_servers=servers)
    async with open_runtime(settings) as runtime:
        first = await _call(runtime, "raw_garbageline", {})
        second = await _call(runtime, "raw_garbageline", {})
    # Nothing ties a line that is not JSON to a call: each waits for its answer.
    assert [first.outcome, second.outcome] == ["timed_out", "timed_out"]
    logged = capsys.readouterr().err
    assert "Failed to parse JSONRPC message" not in logged
    assert "Traceback" not in logged
    strays = [line for line in logged.splitlines() if "answers no call" in line]
    assert len(strays) == 1, strays
    assert "MCP server 'raw'" in strays[0]
    assert 'not JSON: "this is not json <b>"' in strays[0]
