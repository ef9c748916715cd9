"""An MCP server's tools that change while Aptix runs: ``notifications/tools/list_changed``."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import ScriptedModel, reply
from aptix.tools import AgentToolCall
from tests.tools.mcp_servers import flaky_server
from tests.tools.modes import modes_offering


def _settings(tmp_path: Path, **extra: Any) -> AptixSettings:
    return AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        mcp_servers={"flaky": flaky_server(tmp_path / "calls.log", timeout_seconds=4, **extra)},
        modes_path=modes_offering(tmp_path, "flaky_*"),
    )


@pytest.fixture
async def flaky(tmp_path: Path) -> AsyncIterator[Runtime]:
    # The default approval policy, "destructive": a new tool is governed like the first ones.
    async with open_runtime(_settings(tmp_path)) as runtime:
        yield runtime


@pytest.fixture
async def ungated(tmp_path: Path) -> AsyncIterator[Runtime]:
    async with open_runtime(_settings(tmp_path, approval="never")) as runtime:
        yield runtime


async def _run(runtime: Runtime, name: str, arguments: dict[str, Any]) -> Any:
    return await runtime.executor.execute(
        AgentToolCall(f"c-{name}", name, json.dumps(arguments)), runtime.tool_context()
    )


async def _until(runtime: Runtime, name: str, registered: bool) -> None:
    """Wait for the re-listing, which runs in the background, to (un)register ``name``."""
    deadline = asyncio.get_running_loop().time() + 20
    while runtime.registry.has_tool(name) is not registered:
        assert asyncio.get_running_loop().time() < deadline, runtime.registry.registered_tools
        await asyncio.sleep(0.05)


async def _offered(runtime: Runtime) -> list[str]:
    """The tools the model is offered in a turn of the default mode."""
    model = ScriptedModel()
    model.add(reply("ok"))
    created = await runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    await runtime.reasoner(model).execute(
        session_id=created.result.id, org="acme", user="ann", instruction="hi"
    )
    return list(model.offered_tools())


async def test_tools_a_server_adds_are_offered_with_the_checks_and_approval_of_the_first(
    flaky: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="aptix")
    assert not flaky.registry.has_tool("flaky_late")
    grown = await _run(flaky, "flaky_grow", {})
    assert grown.outcome == "succeeded", grown.error_message
    await _until(flaky, "flaky_late", registered=True)
    late = await _run(flaky, "flaky_late", {"text": "hi"})
    assert late.outcome == "succeeded", late.error_message
    assert json.loads(late.result_json)["content"][0]["text"] == "late hi"
    # Unannotated, so destructive: prepared as an approval request, not run.
    gated = await flaky.executor.invoke("flaky_late_write", '{"text": "x"}', flaky.tool_context())
    assert json.loads(gated.result or "")["kind"] == "approval_request"
    # The contract checks of start-up: a name over 64 characters is left out, named.
    assert not any(n.startswith("flaky_late_xx") for n in flaky.registry.registered_tools)
    left_out = [r.getMessage() for r in caplog.records if "is left out" in r.getMessage()]
    assert sum(f"tool 'late_{'x' * 60}' is left out" in m for m in left_out) == 1, left_out
    assert any(
        "MCP server 'flaky' changed its tools: added flaky_late, flaky_late_write." in m
        for m in (r.getMessage() for r in caplog.records)
    )
    assert {"flaky_late", "flaky_late_write"} <= set(await _offered(flaky))
    # A changed tool is replaced; the one left out is not reported again.
    before = flaky.registry.get_tool_type("flaky_late")
    reworded = await _run(flaky, "flaky_reword", {"description": "Says it late."})
    assert reworded.outcome == "succeeded", reworded.error_message
    deadline = asyncio.get_running_loop().time() + 20
    while flaky.registry.get_tool_type("flaky_late") is before:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.05)
    [schema] = flaky.registry.schemas({"flaky_late"})
    assert schema["description"] == "Says it late."
    left_out = [r.getMessage() for r in caplog.records if "is left out" in r.getMessage()]
    assert sum(f"tool 'late_{'x' * 60}' is left out" in m for m in left_out) == 1, left_out


async def test_a_tool_the_server_removes_stops_being_offered_and_its_call_in_flight_ends(
    ungated: Runtime,
) -> None:
    running = asyncio.create_task(_run(ungated, "flaky_slow", {"text": "A", "seconds": 2}))
    await asyncio.sleep(0.5)
    removed = await _run(ungated, "flaky_shrink", {"name": "slow"})
    assert removed.outcome == "succeeded", removed.error_message
    await _until(ungated, "flaky_slow", registered=False)
    finished = await running
    assert finished.outcome == "succeeded", finished.error_message
    assert json.loads(finished.result_json)["content"][0]["text"] == "A"
    offered = await _offered(ungated)
    assert "flaky_slow" not in offered
    assert "flaky_echo" in offered
    refused = await _run(ungated, "flaky_slow", {"text": "B", "seconds": 0})
    assert refused.outcome == "failed"
    assert "Unknown tool 'flaky_slow'" in (refused.error_message or "")


async def test_a_tool_renamed_only_in_case_is_offered_under_its_new_name(
    ungated: Runtime,
) -> None:
    """Review s1 F1: the new name was refused as the old one's twin, then the old removed."""
    recased = await _run(ungated, "flaky_recase", {})
    assert recased.outcome == "succeeded", recased.error_message
    deadline = asyncio.get_running_loop().time() + 20
    while "flaky_Hello_World" not in ungated.registry.registered_tools:
        assert asyncio.get_running_loop().time() < deadline, ungated.registry.registered_tools
        await asyncio.sleep(0.05)
    assert "flaky_hello_world" not in ungated.registry.registered_tools
    said = await _run(ungated, "flaky_Hello_World", {})
    assert said.outcome == "succeeded", said.error_message
    assert json.loads(said.result_json)["content"][0]["text"] == "hi"
