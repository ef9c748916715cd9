"""Tools re-exported from MCP servers, called through the SDK's client (which checks results)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mcp.client.client import Client

from aptix.mcp import build_mcp_server
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from tests.api.live import serve
from tests.tools.mcp_servers import time_server

OWN_SESSION = str(Path(__file__).with_name("own_session_server.py"))


def _settings(tmp_path: Path, servers: dict[str, Any]) -> AptixSettings:
    return AptixSettings(
        data_dir=tmp_path, load_plugins=False, semantic_matching=False, mcp_servers=servers
    )


async def test_structured_content_follows_the_listed_output_schema(tmp_path: Path) -> None:
    servers = {"time": time_server(approval="never", args=["--local-timezone", "UTC"])}
    async with (
        open_runtime(_settings(tmp_path, servers)) as runtime,
        Client(build_mcp_server(runtime)) as client,
    ):
        listed = {t.name: t for t in (await client.list_tools()).tools}
        # The client validates the structured content against the listed schema (it raised).
        now = await client.call_tool("time_get_current_time", {"timezone": "UTC"})
        converted = await client.call_tool(
            "time_convert_time",
            {"source_timezone": "UTC", "time": "10:00", "target_timezone": "Asia/Tokyo"},
        )
    assert listed["time_get_current_time"].output_schema is not None
    assert not now.is_error
    assert now.structured_content is not None
    assert now.structured_content["timezone"] == "UTC"
    assert json.loads(now.content[0].text)["timezone"] == "UTC"  # type: ignore[union-attr]
    assert converted.structured_content is not None
    assert converted.structured_content["target"]["timezone"] == "Asia/Tokyo"


async def test_aptix_behind_aptix_passes_structured_content_through(tmp_path: Path) -> None:
    (tmp_path / "up").mkdir()
    with serve(tmp_path / "up", APTIX_SEMANTIC_MATCHING="false") as base:
        servers = {"up": {"url": f"{base}/mcp", "approval": "never"}}
        async with (
            open_runtime(_settings(tmp_path, servers)) as runtime,
            Client(build_mcp_server(runtime)) as client,
        ):
            greeted = await client.call_tool("up_agent_hello_world", {"name": "Ann"})
    assert not greeted.is_error
    assert greeted.structured_content is not None
    assert greeted.structured_content["message"] == "Hello, Ann! Welcome to Aptix."


async def test_a_tools_own_session_id_argument_is_passed_through(tmp_path: Path) -> None:
    servers = {"own": {"command": sys.executable, "args": [OWN_SESSION], "approval": "never"}}
    async with open_runtime(_settings(tmp_path, servers)) as runtime:
        created = await runtime.services.sessions.create_session(org="local", user="local")
        assert created.result is not None
        session = created.result.id
        async with Client(build_mcp_server(runtime)) as client:
            echo = {t.name: t for t in (await client.list_tools()).tools}["own_echo"]
            mine = await client.call_tool("own_echo", {"text": "hi", "sessionId": "abc-123"})
            in_session = await client.call_tool(
                "own_echo",
                {"text": "hi", "sessionId": session},
                meta={"aptix/sessionId": session},  # type: ignore[typeddict-unknown-key]
            )
    # Listed as the server lists it, with no selector of Aptix's mixed in.
    assert (
        echo.input_schema["properties"]["sessionId"]["description"] == "The 'sessionId' argument."
    )
    assert not mine.is_error, mine.content
    assert json.loads(mine.content[0].text)["sessionId"] == "abc-123"  # type: ignore[union-attr]
    assert not in_session.is_error, in_session.content
    assert json.loads(in_session.content[0].text)["sessionId"] == session  # type: ignore[union-attr]


async def test_every_casing_of_session_id_and_meta_select_the_session(tmp_path: Path) -> None:
    async with open_runtime(_settings(tmp_path, {})) as runtime:
        created = await runtime.services.sessions.create_session(
            org="local", user="local", mode="calculation"
        )
        assert created.result is not None
        session = created.result.id
        async with Client(build_mcp_server(runtime)) as client:
            # The calculation mode does not offer the hello tool: a call in the session fails.
            refused = [
                await client.call_tool("agent_hello_world", {"name": "x", key: session})
                for key in ("sessionId", "SessionId", "session_id")
            ]
            refused.append(
                await client.call_tool(
                    "agent_hello_world",
                    {"name": "x"},
                    meta={"aptix/sessionId": session},  # type: ignore[typeddict-unknown-key]
                )
            )
            conflicting = await client.call_tool(
                "agent_hello_world",
                {"name": "x", "session_id": "other"},
                meta={"aptix/sessionId": session},  # type: ignore[typeddict-unknown-key]
            )
            outside = await client.call_tool("agent_hello_world", {"name": "x"})
    for result in refused:
        assert result.is_error
        assert "not offered in this mode" in result.content[0].text  # type: ignore[union-attr]
    assert conflicting.is_error
    assert not outside.is_error
