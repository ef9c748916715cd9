"""An answer nested deeper than the ``mcp`` SDK's parser reads still answers its call.

pydantic's JSON parser stops at 200 levels and calls such a line not JSON. The line is valid,
carries the call's id, and the server ran the call: the call fails at once, saying why,
rather than waiting for its limit as if the server had not answered (review r6 F1).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.tools import AgentToolCall
from tests.tools.mcp_servers import listed_server

_EMPTY = {"type": "object", "properties": {}}
_TOOLS = json.dumps(
    [
        {"name": name, "inputSchema": _EMPTY, "annotations": {"destructiveHint": True}}
        for name in ("deep", "deepnote")
    ]
)


@pytest.mark.parametrize("depth", [300, 5_000])  # past pydantic's limit; past json.loads' too
async def test_an_answer_nested_past_the_sdks_parser_fails_its_call_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], depth: int
) -> None:
    log = tmp_path / "ran.log"
    server = listed_server(tmp_path, _TOOLS, log, timeout_seconds=20, approval="never")
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, mcp_servers={"dp": server})
    async with open_runtime(settings) as runtime:
        context = runtime.tool_context()
        started = time.monotonic()
        deep = AgentToolCall("c-deep", "dp_deep", json.dumps({"depth": depth}))
        call = await runtime.executor.execute(deep, context)
        took = time.monotonic() - started
        shallow = AgentToolCall("c-shallow", "dp_deep", json.dumps({"depth": 100}))
        after = await runtime.executor.execute(shallow, context)
    assert call.outcome == "failed", (call.outcome, call.error_message)
    assert took < 10, took  # not the 20 s limit
    message = call.error_message or ""
    assert "MCP server 'dp' failed while calling 'deep'" in message
    assert (
        "its answer is not a valid JSON-RPC response (it nests deeper than the MCP SDK reads: "
        "recursion limit exceeded" in message
    ), message
    assert '{"jsonrpc": "2.0", "id": ' in message  # the answer quoted
    assert "no answer within" not in message
    assert after.outcome == "succeeded", after.error_message  # the session goes on
    assert log.read_text(encoding="utf-8").splitlines() == ["ran deep", "ran deep"]
    logged = capsys.readouterr().err
    assert "answers no call" not in logged
    assert "not JSON" not in logged
    assert "the request was cancelled" not in logged  # no cancel for a call answered
    assert "Traceback" not in logged


async def test_a_message_nested_past_the_sdks_parser_that_answers_no_call_is_told_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = listed_server(tmp_path, _TOOLS, timeout_seconds=20, approval="never")
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, mcp_servers={"dp": server})
    async with open_runtime(settings) as runtime:
        note = AgentToolCall("c-note", "dp_deepnote", json.dumps({"depth": 300}))
        call = await runtime.executor.execute(note, runtime.tool_context())
    assert call.outcome == "succeeded", call.error_message
    strays = [line for line in capsys.readouterr().err.splitlines() if "answers no call" in line]
    assert len(strays) == 1, strays
    assert "nested deeper than the MCP SDK reads (recursion limit exceeded" in strays[0]
    assert "not JSON" not in strays[0]
