"""MCP servers as tool sources: real third-party servers and a misbehaving one."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aptix.api import create_app
from aptix.reasoner import ToolResultInput
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import ScriptedModel, call, reply
from aptix.tools import AgentToolCall
from tests.tools.mcp_servers import flaky_server, late_server, time_server
from tests.tools.modes import modes_offering


def _settings(tmp_path: Path, servers: dict[str, Any], *tools: str) -> AptixSettings:
    return AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        mcp_servers=servers,
        modes_path=modes_offering(tmp_path, *tools) if tools else None,
    )


def _from_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, servers: dict[str, Any], *tools: str
) -> AptixSettings:
    """Settings whose servers come from ``APTIX_MCP_SERVERS``, as a deployment gives them."""
    monkeypatch.setenv("APTIX_MCP_SERVERS", json.dumps(servers))
    settings = AptixSettings(
        data_dir=tmp_path, load_plugins=False, modes_path=modes_offering(tmp_path, *tools)
    )
    assert set(settings.mcp_servers) == set(servers)
    return settings


@pytest.fixture
async def time_runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Runtime]:
    settings = _from_env(tmp_path, monkeypatch, {"time": time_server()}, "time_*")
    async with open_runtime(settings) as runtime:
        yield runtime


async def _turn(runtime: Runtime, model: ScriptedModel, **kwargs: Any) -> Any:
    created = await runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    result = await runtime.reasoner(model).execute(
        session_id=created.result.id, org="acme", user="ann", **kwargs
    )
    return created.result.id, result


async def test_time_server_tools_are_registered_with_their_annotations(
    time_runtime: Runtime,
) -> None:
    registry = time_runtime.registry
    assert {"time_get_current_time", "time_convert_time"} <= set(registry.registered_tools)
    tool_cls = registry.get_tool_type("time_get_current_time")
    assert tool_cls is not None
    assert tool_cls.TOOL_ANNOTATIONS is not None
    assert tool_cls.TOOL_ANNOTATIONS["readOnlyHint"] is True
    assert tool_cls.is_fully_executed_on_server  # read-only: no approval under the default
    schema = tool_cls.schema()
    assert schema["parameters"]["required"] == ["timezone"]
    assert "title" not in json.dumps(schema["parameters"])


async def test_results_keep_text_and_structured_content(time_runtime: Runtime) -> None:
    outcome = await time_runtime.executor.invoke(
        "time_get_current_time", '{"timezone": "Europe/Lisbon"}', time_runtime.tool_context()
    )
    assert outcome.result is not None, outcome.error_message
    payload = json.loads(outcome.result)
    assert payload["structuredContent"]["timezone"] == "Europe/Lisbon"
    [text] = payload["content"]
    assert json.loads(text["text"])["timezone"] == "Europe/Lisbon"
    bad = await time_runtime.executor.invoke(
        "time_get_current_time", '{"timezone": "Nowhere/X"}', time_runtime.tool_context()
    )
    assert bad.error_message is not None
    assert bad.error_message.startswith("The tool 'time_get_current_time' reported an error:")


async def test_one_session_per_server_is_reused(time_runtime: Runtime) -> None:
    assert time_runtime.mcp is not None
    connection = time_runtime.mcp.connections["time"]
    first = connection._live
    for _ in range(3):
        await time_runtime.executor.invoke(
            "time_get_current_time", '{"timezone": "UTC"}', time_runtime.tool_context()
        )
    assert connection._live is first is not None


async def test_a_scripted_model_calls_the_time_tool_in_a_turn(time_runtime: Runtime) -> None:
    model = ScriptedModel()
    model.add(
        reply(None, call("time_get_current_time", {"timezone": "Asia/Tokyo"}, id="t1")),
        reply("It is late in Tokyo."),
    )
    _, result = await _turn(time_runtime, model, instruction="What time is it in Tokyo?")
    assert result.text == "It is late in Tokyo."
    assert "time_get_current_time" in model.offered_tools()
    content = json.loads(model.requests[1].messages[-1]["content"])
    assert content["structuredContent"]["timezone"] == "Asia/Tokyo"
    model.assert_complete()


def _approval_runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, log: Path) -> Any:
    servers = {"time": time_server(approval="always"), "flaky": flaky_server(log)}
    return open_runtime(_from_env(tmp_path, monkeypatch, servers, "time_*", "flaky_*"))


def _time_server_calls(runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tools the ``time`` server is asked to run from now on, in the order asked."""
    assert runtime.mcp is not None
    connection = runtime.mcp.connections["time"]
    real = connection.call_tool
    calls: list[str] = []

    async def spy(tool: str, arguments: dict[str, Any], meta: Any = None) -> Any:
        calls.append(tool)
        return await real(tool, arguments, meta)

    monkeypatch.setattr(connection, "call_tool", spy)
    return calls


async def test_approval_always_waits_for_the_client_and_a_denial_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _approval_runtime(tmp_path, monkeypatch, tmp_path / "calls.log") as runtime:
        calls = _time_server_calls(runtime, monkeypatch)
        model = ScriptedModel()
        model.add(reply(None, call("time_get_current_time", {"timezone": "UTC"}, id="t1")))
        session_id, pending = await _turn(runtime, model, instruction="time?")
        assert pending.kind == "tool-only"
        [handed] = pending.tool_calls
        assert handed["requiresClientExecution"] is True
        request = json.loads(handed["resultJson"])
        assert request["kind"] == "approval_request"
        assert "time_get_current_time" in request["prompt"]
        assert calls == []  # waiting for the client: nothing ran
        model.add(reply("Understood, I will not check the time."))
        done = await runtime.reasoner(model).execute(
            session_id=session_id,
            org="acme",
            user="ann",
            tool_results=[ToolResultInput("t1", json.dumps({"approved": False}))],
        )
        assert done.text == "Understood, I will not check the time."
        assert calls == []  # denied: still nothing ran
        told = json.loads(model.requests[1].messages[-1]["content"])
        assert told["error"] == "The user did not approve 'time_get_current_time'; it was not run."
        [turn] = await runtime.turns.list_turns(session_id, "acme")
        assert turn.tool_calls[-1]["approved"] is False


async def test_over_http_approval_always_waits_for_the_client_then_runs_once_approved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _approval_runtime(tmp_path, monkeypatch, tmp_path / "calls.log") as runtime:
        calls = _time_server_calls(runtime, monkeypatch)
        model = ScriptedModel()
        model.add(
            reply(None, call("time_get_current_time", {"timezone": "UTC"}, id="t1")),
            reply("It is noon in UTC."),
        )
        app = create_app(runtime=runtime, model=model)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as api:
            first = await api.post("/v1/agent/execute", json={"instruction": "time?"})
            assert first.status_code == 200, first.text
            pending = first.json()
            assert calls == []  # handed to the client: nothing ran yet
            done = await api.post(
                "/v1/agent/execute",
                json={
                    "sessionId": pending["sessionId"],
                    "toolResults": [{"callId": "t1", "result": "approve"}],
                },
            )
    assert pending["kind"] == "tool-only"
    [handed] = pending["toolCalls"]
    assert handed["requiresClientExecution"] is True
    assert json.loads(handed["resultJson"])["kind"] == "approval_request"
    assert done.status_code == 200, done.text
    assert done.json()["text"] == "It is noon in UTC."
    assert calls == ["get_current_time"]  # run once, after the approval
    seen = json.loads(model.requests[1].messages[-1]["content"])
    assert seen["structuredContent"]["timezone"] == "UTC"
    model.assert_complete()


async def test_over_the_openai_endpoint_a_denied_approval_is_not_handed_over_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The resumed answer lists the denied call with its outcome; handed over as a tool
    # call again, the client would answer it and be refused (nothing waits for it).
    async with _approval_runtime(tmp_path, monkeypatch, tmp_path / "calls.log") as runtime:
        model = ScriptedModel()
        model.add(
            reply(None, call("time_get_current_time", {"timezone": "UTC"}, id="t1")),
            reply("Understood, I will not check the time."),
        )
        transport = httpx.ASGITransport(app=create_app(runtime=runtime, model=model))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as api:
            ask = {"role": "user", "content": "time?"}
            first = await api.post(
                "/v1/chat/completions", json={"model": "aptix-general", "messages": [ask]}
            )
            [handed] = first.json()["choices"][0]["message"]["tool_calls"]
            answer = {"role": "tool", "tool_call_id": handed["id"], "content": "no"}
            done = await api.post(
                "/v1/chat/completions",
                headers={"X-Aptix-Session": first.headers["X-Aptix-Session"]},
                json={
                    "model": "aptix-general",
                    "messages": [ask, first.json()["choices"][0]["message"], answer],
                },
            )
    assert done.status_code == 200, done.text
    [choice] = done.json()["choices"]
    assert choice["finish_reason"] == "stop"
    assert not choice["message"].get("tool_calls")
    assert choice["message"]["content"].endswith("Understood, I will not check the time.")
    [listed] = done.json()["aptix"]["toolCalls"]
    assert (listed["callId"], listed["outcome"]) == ("t1", "denied")


async def test_an_approved_call_runs_and_the_model_sees_its_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "calls.log"
    async with _approval_runtime(tmp_path, monkeypatch, log) as runtime:
        tool_cls = runtime.registry.get_tool_type("flaky_delete_everything")
        assert tool_cls is not None
        assert not tool_cls.is_fully_executed_on_server  # destructive: approval by default
        echo = runtime.registry.get_tool_type("flaky_echo")
        assert echo is not None
        assert echo.is_fully_executed_on_server  # read-only: runs at once
        model = ScriptedModel()
        model.add(reply(None, call("flaky_delete_everything", {"target": "db"}, id="d1")))
        session_id, _ = await _turn(runtime, model, instruction="delete the db")
        assert not log.exists()
        model.add(reply("Deleted."))
        done = await runtime.reasoner(model).execute(
            session_id=session_id,
            org="acme",
            user="ann",
            tool_results=[ToolResultInput("d1", json.dumps({"approved": True}))],
        )
        assert done.text == "Deleted."
        assert log.read_text().split() == ["delete_everything"]
        content = json.loads(model.requests[1].messages[-1]["content"])
        assert content["content"][0]["text"] == "deleted db"


async def test_a_broken_server_is_named_and_the_working_one_still_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    servers = {
        "time": time_server(),
        "broken": {"command": str(tmp_path / "no-such-server"), "timeout_seconds": 5},
    }
    async with open_runtime(_settings(tmp_path, servers, "broken_*")) as runtime:
        assert runtime.mcp is not None
        status = runtime.mcp.status()
        outcome = await runtime.executor.invoke(
            "time_get_current_time", '{"timezone": "UTC"}', runtime.tool_context()
        )
    assert outcome.result is not None
    assert status["time"] is None
    assert "MCP server 'broken' failed while connecting" in (status["broken"] or "")
    warnings = [line for line in capsys.readouterr().err.splitlines() if "'broken'" in line]
    assert len(warnings) == 1
    assert "WARNING" in warnings[0]


async def test_a_server_down_at_start_up_is_registered_once_it_comes_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flag = tmp_path / "up"
    servers = {
        "late": late_server(flag, timeout_seconds=7, approval="never"),
        "time": time_server(),
    }
    # `late_*` in the mode is accepted while the server is down.
    settings = _settings(tmp_path, servers, "late_*").model_copy(
        update={"tool_timeout_seconds": 2}  # below the server's 7 s: the margin must win
    )
    async with open_runtime(settings) as runtime:
        assert runtime.mcp is not None
        assert "MCP server 'late' failed while connecting" in (runtime.mcp.status()["late"] or "")
        assert not any(n.startswith("late_") for n in runtime.registry.registered_tools)
        flag.touch()
        deadline = asyncio.get_running_loop().time() + 180  # retries back off: 1, 5, 30 s
        while not runtime.registry.has_tool("late_echo"):
            assert asyncio.get_running_loop().time() < deadline, runtime.mcp.status()
            await asyncio.sleep(0.1)
        echo = await _invoke(runtime, "late_echo", '{"text": "up"}')
        hung = await _invoke(runtime, "late_hang")
        status = runtime.mcp.status()
    assert echo.was_executed, echo.error_message
    assert json.loads(echo.result_json or "")["content"][0]["text"] == "up"
    # Registered late, its tools still get the server's limit plus a margin (7 + 5 s), not the
    # 2 s default, so the server's own limit fails the call first, naming the server.
    assert hung.error_message is not None
    assert "MCP server 'late' failed while calling 'hang': no answer within 7" in (
        hung.error_message
    )
    assert status["time"] is None
    err = capsys.readouterr().err
    assert err.count("MCP server 'late' failed while connecting") == 1  # once, not per retry


async def test_v1_tools_shows_mcp_tools_with_their_annotations(time_runtime: Runtime) -> None:
    app = create_app(runtime=time_runtime)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        listed = (await client.get("/v1/tools")).json()
        invoked = await client.post(
            "/v1/tools/time_get_current_time/invoke", json={"arguments": {"timezone": "UTC"}}
        )
    [row] = [r for r in listed if r["name"] == "time_get_current_time"]
    assert row["annotations"]["readOnlyHint"] is True
    assert row["serverFinal"] is True
    assert row["schema"]["parameters"]["required"] == ["timezone"]
    assert invoked.json()["result"]["structuredContent"]["timezone"] == "UTC"


@pytest.fixture
async def flaky_runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    servers = {
        "flaky": flaky_server(timeout_seconds=3, max_result_bytes=100_000, approval="never"),
        "time": time_server(),
    }
    async with open_runtime(_settings(tmp_path, servers)) as runtime:
        yield runtime


async def _invoke(runtime: Runtime, name: str, arguments: str = "{}") -> Any:
    return await runtime.executor.execute(
        AgentToolCall("c", name, arguments), runtime.tool_context()
    )


async def _eventually(runtime: Runtime, name: str, arguments: str) -> Any:
    """The call once it runs: a reconnect slower than one call's limit goes on meanwhile."""
    deadline = time.monotonic() + 30
    while not (done := await _invoke(runtime, name, arguments)).was_executed:
        assert time.monotonic() < deadline, done.error_message
        message = done.error_message or ""
        assert "not connected within the call's limit" in message, message
    return done


async def test_a_crashing_server_fails_the_call_and_is_reconnected(flaky_runtime: Runtime) -> None:
    crashed = await _invoke(flaky_runtime, "flaky_crash")
    assert crashed.error_message is not None
    assert "MCP server 'flaky' failed while calling 'crash'" in crashed.error_message
    again = await _eventually(flaky_runtime, "flaky_echo", '{"text": "back"}')
    assert again.was_executed, again.error_message
    assert json.loads(again.result_json or "")["content"][0]["text"] == "back"


async def test_a_hanging_server_fails_within_its_timeout_and_never_blocks_others(
    flaky_runtime: Runtime,
) -> None:
    hung = await _invoke(flaky_runtime, "flaky_hang")
    assert hung.error_message is not None
    # The server's own 3 s limit ended it (the executor's would say "timed out after 8").
    assert "no answer within 3 seconds" in hung.error_message
    other = await _invoke(flaky_runtime, "time_get_current_time", '{"timezone": "UTC"}')
    assert other.was_executed
    again = await _eventually(flaky_runtime, "flaky_echo", '{"text": "ok"}')
    assert again.was_executed, again.error_message


async def test_a_call_after_a_failed_call_ends_within_the_servers_timeout(
    flaky_runtime: Runtime,
) -> None:
    first = await _invoke(flaky_runtime, "flaky_hang")
    assert first.error_message is not None
    started = time.monotonic()
    # Reconnecting is part of the call: it took the reconnect plus the full 3 s before.
    second = await _invoke(flaky_runtime, "flaky_hang")
    elapsed = time.monotonic() - started
    assert "no answer within 3 seconds" in (second.error_message or "")
    assert elapsed < 3.9, elapsed
    again = await _eventually(flaky_runtime, "flaky_echo", '{"text": "ok"}')
    assert again.was_executed, again.error_message


async def test_huge_and_malformed_results_are_clear_failures(flaky_runtime: Runtime) -> None:
    huge = await _invoke(flaky_runtime, "flaky_huge")
    assert huge.error_message is not None
    # Ten megabytes either arrive and are refused, or do not arrive within the 3 s limit.
    assert (
        "over the limit of 100000 bytes" in huge.error_message
        or "no answer within 3 seconds" in huge.error_message
    )
    # A timeout sends the server a ping (its pipe may still be clogged): wait for its answer,
    # or for the restart, before the next call.
    assert flaky_runtime.mcp is not None
    live = flaky_runtime.mcp.connections["flaky"]._live
    if live is not None and live.probe is not None:
        await live.probe
    malformed = await _invoke(flaky_runtime, "flaky_malformed")
    assert malformed.error_message is not None
    assert "MCP server 'flaky' failed while calling 'malformed'" in malformed.error_message
    again = await _eventually(flaky_runtime, "flaky_echo", '{"text": "fine"}')
    assert again.was_executed, again.error_message


async def test_bad_names_and_schemas_are_sanitised_or_left_out_naming_the_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # (A prefix that would take a built-in's name, `agent`, is refused at start-up:
    # test_mcp_concurrent_calls.py.)
    servers = {"flaky": flaky_server()}
    async with open_runtime(_settings(tmp_path, servers)) as runtime:
        names = runtime.registry.registered_tools
    assert "flaky_weird_name_x" in names
    messages = capsys.readouterr().err
    # A recursive input schema cannot be offered to a model: refused, naming server and tool.
    assert "flaky_tree" not in names
    assert "MCP server 'flaky': tool 'tree' is left out" in messages
    assert "refers to itself through 'Node'" in messages


def test_cli_lists_and_calls_the_time_tool(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "APTIX_DATA_DIR": str(tmp_path),
        "APTIX_MCP_SERVERS": json.dumps({"time": time_server()}),
    }
    listed = subprocess.run(
        [sys.executable, "-m", "aptix", "tools", "list", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["time_get_current_time"]["annotations"]["readOnlyHint"] is True
    called = subprocess.run(
        [
            sys.executable,
            "-m",
            "aptix",
            "tools",
            "call",
            "time_get_current_time",
            '{"timezone": "Europe/Paris"}',
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert called.returncode == 0, called.stderr
    assert "Europe/Paris" in called.stdout


def test_an_oversized_result_is_refused_and_errors_keep_the_servers_words() -> None:
    from mcp import types

    from aptix.tools.mcp_source.tool import result_to_json

    big = types.CallToolResult(content=[types.TextContent(type="text", text="x" * 2_000)])
    refused = result_to_json(big, "t_big", 1_000)
    assert refused.error_message is not None
    assert refused.error_message.startswith("The tool 't_big' returned ")
    assert "over the limit of 1000 bytes" in refused.error_message
    failed = types.CallToolResult(
        content=[types.TextContent(type="text", text="bad input")], is_error=True
    )
    assert result_to_json(failed, "t", 1_000).error_message == (
        "The tool 't' reported an error: bad input"
    )


def test_prefix_patterns_expand_and_validate() -> None:
    from aptix.tool_names import expand_names, is_known

    registered = ["agent_calculator", "time_get_current_time", "time_convert_time"]
    assert expand_names(["agent_calculator", "time_*", "time_convert_time"], registered) == [
        "agent_calculator",
        "time_get_current_time",
        "time_convert_time",
    ]
    assert is_known("time_*", [*registered, "time_*"])  # start-up lends each server's
    assert is_known("git_*", ["git_*"])  # a configured server that is down
    assert not is_known("nope_*", registered)
    # Only a server's own pattern is known: not one that merely matches registered tools.
    assert not is_known("time_*", registered)
    assert not is_known("*", [*registered, "time_*"])


async def test_workflow_permitted_tools_take_a_prefix_pattern(time_runtime: Runtime) -> None:
    from aptix.workflows.guard import offered_tools, workflow_guard
    from aptix.workflows.manifest import WorkflowManifest

    registry = time_runtime.workflows.registry
    manifest = WorkflowManifest.model_validate(
        {
            "workflowId": "time_check",
            "title": "Check the time",
            "description": "Tells the time.",
            "userIntentPatterns": ["what time is it"],
            "instructionText": "Call the time tools.",
            "permittedTools": ["time_*"],
            "completionCriteria": "The time was told.",
            "version": "1.0.0",
            "status": "published",
        }
    )
    assert registry.problems(manifest) == []  # `time_*` names a configured server
    registry.publish(manifest)
    names = time_runtime.registry.registered_tools
    offered = offered_tools(registry, "time_check", ["agent_calculator", "time_*"], names)
    assert "time_get_current_time" in offered
    assert "agent_calculator" not in offered
    guard = workflow_guard(registry)
    context = time_runtime.tool_context()
    in_workflow = type(context)(active_workflow_id="time_check")
    time_tool = time_runtime.registry.get_tool("time_get_current_time")
    calculator = time_runtime.registry.get_tool("agent_calculator")
    assert time_tool is not None
    assert calculator is not None
    assert guard(time_tool, in_workflow) is None
    assert guard(calculator, in_workflow) is not None


def test_tools_list_shows_hostile_descriptions_as_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from aptix.cli.main import app
    from aptix.cli.output import console

    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("APTIX_MCP_SERVERS", json.dumps({"flaky": flaky_server()}))
    # Wide enough that no description wraps. The console read COLUMNS when it was imported
    # (pytest-xdist workers set COLUMNS=80), so setting the variable now would not reach it.
    monkeypatch.setattr(console, "_width", 300)
    result = CliRunner().invoke(app, ["tools", "list"])
    assert result.exit_code == 0, result.output
    assert "[bold red]markup[/] stays text" in result.stdout
    assert "read-only" in result.stdout


def test_bad_mcp_servers_json_is_one_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from aptix.cli.main import app

    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("APTIX_MCP_SERVERS", "{not json")
    result = CliRunner().invoke(app, ["tools", "list"])
    assert result.exit_code == 2
    assert "APTIX_MCP_SERVERS: not valid JSON" in result.stderr
    assert "Traceback" not in result.output
