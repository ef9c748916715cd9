"""Per-call cost of Aptix tools: the executor path, ``@aptix.tool``, and MCP servers.

Run: ``python -m bench.tools`` (the Pydantic AI row needs the ``bench`` extra:
``pip install -e ".[bench]"``; the MCP rows need ``mcp-server-time`` from the ``test`` extra).

Three tables, each measured in alternating batches within one run, so the ratios hold on a
shared, noisy machine:

1. The executor path for ``agent_hello_world`` against a hand-written floor.
2. One small tool three ways, each from arguments JSON to result JSON: decorated with
   ``@aptix.tool``, the hand-written ``AgentTool`` class it replaces (both through the
   executor), and Pydantic AI's ``FunctionToolset`` (argument validation, ``call_tool`` and
   serialization of the result). Target: decorator ≤ 1.1× the class.
3. ``get_current_time`` of ``mcp-server-time`` over stdio: through Aptix (executor, registered
   tool, shared session, result mapping) against a direct ``mcp`` ``ClientSession.call_tool``
   to a second copy of the same server. Target: Aptix ≤ 1.2× the direct client.

Table 1's targets: the executor's dispatch (executor ÷ direct call, in µs) ≤ 3 µs and the
executor path ≤ 3× the floor, with and without a timeout. The exit status is 1 when a target
is missed; every miss is listed after the last table.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic_core
from pydantic import Field, TypeAdapter

import aptix
from aptix import AgentToolExecutor, AgentToolRegistry
from aptix.results import InvokeResult
from aptix.settings_mcp import McpServerConfig
from aptix.testing import RecordingLogger
from aptix.tools import AgentTool, AgentToolCall, AgentToolExecutionContext
from aptix.tools.args import ToolArgs, function_schema, parse_arguments
from aptix.tools.builtin.hello_world import HelloWorldTool
from aptix.tools.mcp_source.source import McpToolSource
from bench._table import Targets, bench_parser, interleaved_us, print_table, verdict

ARGS = '{"name": "Ann"}'
CONTEXT = AgentToolExecutionContext(session_id="s" * 32, conversation_id="c", org="o", user="u")
TZ_ARGS = {"timezone": "UTC"}
#: The targets: executor dispatch (µs) and executor ÷ floor; decorator ÷ class; Aptix ÷ MCP.
DISPATCH_US = 3.0
FLOOR_RATIO = 3.0
DECORATOR_RATIO = 1.10
MCP_RATIO = 1.20


@dataclass
class _FloorArgs:
    name: str


async def executor_table(targets: Targets) -> None:
    """Executor dispatch cost for ``agent_hello_world`` against a hand-written floor."""
    logger = RecordingLogger()
    registry = AgentToolRegistry(logger)
    registry.register(HelloWorldTool)
    tool = registry.get_tool("agent_hello_world")
    assert tool is not None
    call = AgentToolCall("call-1", "agent_hello_world", ARGS)
    with_timeout = AgentToolExecutor(registry, logger, timeout_seconds=30.0)
    without_timeout = AgentToolExecutor(registry, logger, timeout_seconds=None)
    adapter = TypeAdapter(_FloorArgs)

    async def floor() -> str:
        args = adapter.validate_json(ARGS)
        return json.dumps({"message": f"Hello, {args.name}!", "conversationId": "c"})

    async def direct() -> object:
        return await tool.execute(ARGS, CONTEXT)

    async def executor_30s() -> object:
        return await with_timeout.execute(call, CONTEXT)

    async def executor_no_timeout() -> object:
        return await without_timeout.execute(call, CONTEXT)

    floor_us, direct_us, exec_us, exec_nt_us = await interleaved_us(
        [floor, direct, executor_30s, executor_no_timeout]
    )
    met = True
    for row, took in (("30 s timeout", exec_us), ("no timeout", exec_nt_us)):
        met &= targets.at_most(f"executor dispatch, {row}", took - direct_us, DISPATCH_US, " µs")
        met &= targets.at_most(f"executor ÷ floor, {row}", took / floor_us, FLOOR_RATIO, "×")
    rows = [
        ("floor: TypeAdapter.validate_json + direct call", f"{floor_us:.2f}", "1.00×", "—"),
        ("tool.execute() directly", f"{direct_us:.2f}", f"{direct_us / floor_us:.2f}×", "—"),
        (
            "executor.execute(), 30 s timeout",
            f"{exec_us:.2f}",
            f"{exec_us / floor_us:.2f}×",
            f"{exec_us - direct_us:.2f}",
        ),
        (
            "executor.execute(), no timeout",
            f"{exec_nt_us:.2f}",
            f"{exec_nt_us / floor_us:.2f}×",
            f"{exec_nt_us - direct_us:.2f}",
        ),
    ]
    print_table(
        f"Executor path, agent_hello_world (median µs/call; target: dispatch ≤ {DISPATCH_US:g} µs, "
        f"≤ {FLOOR_RATIO:g}× floor): {verdict(met)}",
        ["path", "µs/call", "× floor", "dispatch µs"],
        rows,
    )


# --- one small tool, three ways -------------------------------------------------------------


@aptix.tool(usage="Call this tool to greet someone by name.")
async def bench_greet(name: str, context: AgentToolExecutionContext) -> dict[str, Any]:
    """Greets a person.

    Args:
        name: The name of the person to greet.
    """
    return {"message": f"Hello, {name}!", "conversationId": context.conversation_id}


class _GreetArgs(ToolArgs):
    name: str = Field(description="The name of the person to greet.")


class GreetTool(AgentTool):
    """The hand-written class ``bench_greet`` replaces."""

    TOOL_NAME = "bench_greet_class"
    TOOL_USAGE_METADATA = "Call this tool to greet someone by name."

    def __init__(self, logger: Any) -> None:
        self._logger = logger

    @classmethod
    def schema(cls) -> dict[str, Any]:
        return function_schema(cls.TOOL_NAME, "Greets a person.", _GreetArgs)

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        parsed = parse_arguments(_GreetArgs, arguments_json)
        if parsed.result is None:
            return InvokeResult(errors=parsed.errors)
        payload = {
            "message": f"Hello, {parsed.result.name}!",
            "conversationId": context.conversation_id,
        }
        return InvokeResult.create(json.dumps(payload))


try:  # the `bench` extra
    from pydantic_ai import RunContext
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.toolsets import FunctionToolset
    from pydantic_ai.usage import RunUsage
except ImportError:  # pragma: no cover
    FunctionToolset = None


async def pai_greet(ctx: RunContext[str], name: str) -> dict[str, Any]:
    """Greets a person.

    Args:
        ctx: The run context.
        name: The name of the person to greet.
    """
    return {"message": f"Hello, {name}!", "conversationId": ctx.deps}


async def _pydantic_ai_call() -> Callable[[], Awaitable[object]] | None:
    if FunctionToolset is None:
        return None
    toolset: Any = FunctionToolset([pai_greet])
    ctx: Any = RunContext(deps="c", model=TestModel(), usage=RunUsage())
    tool = (await toolset.get_tools(ctx))["pai_greet"]
    validator = tool.args_validator

    async def call() -> object:
        args = validator.validate_json(ARGS)
        value = await toolset.call_tool("pai_greet", args, ctx, tool)
        return pydantic_core.to_json(value).decode()

    return call


async def decorator_table(targets: Targets) -> float:
    """One greeting tool three ways; returns decorator ÷ class."""
    logger = RecordingLogger()
    registry = AgentToolRegistry(logger)
    registry.register(bench_greet)
    registry.register(GreetTool)
    executor = AgentToolExecutor(registry, logger, timeout_seconds=30.0)
    decorated_call = AgentToolCall("call-1", "bench_greet", ARGS)
    class_call = AgentToolCall("call-1", "bench_greet_class", ARGS)

    async def decorated() -> object:
        done = await executor.execute(decorated_call, CONTEXT)
        assert done.result_json is not None
        return done

    async def hand_written() -> object:
        done = await executor.execute(class_call, CONTEXT)
        assert done.result_json is not None
        return done

    direct_tool = registry.get_tool("bench_greet")
    assert direct_tool is not None

    async def decorated_direct() -> object:
        return await direct_tool.execute(ARGS, CONTEXT)

    candidates: list[Callable[[], Awaitable[object]]] = [decorated, hand_written, decorated_direct]
    pydantic_ai = await _pydantic_ai_call()
    if pydantic_ai is not None:
        candidates.append(pydantic_ai)
    timings = await interleaved_us(candidates)
    deco_us, class_us, bare_us = timings[0], timings[1], timings[2]
    rows = [
        ("@aptix.tool function, through the executor", f"{deco_us:.2f}", "1.00×"),
        (
            "hand-written AgentTool class, through the executor",
            f"{class_us:.2f}",
            f"{class_us / deco_us:.2f}×",
        ),
        (
            "@aptix.tool function, its execute() called directly (no executor)",
            f"{bare_us:.2f}",
            f"{bare_us / deco_us:.2f}×",
        ),
    ]
    if pydantic_ai is not None:
        pai_us = timings[3]
        rows.append(
            (
                "Pydantic AI FunctionToolset: validate_json + call_tool + to_json",
                f"{pai_us:.2f}",
                f"{pai_us / deco_us:.2f}×",
            )
        )
    else:
        rows.append(('Pydantic AI FunctionToolset (pip install -e ".[bench]")', "—", "—"))
    ratio = deco_us / class_us
    met = targets.at_most("decorator ÷ class", ratio, DECORATOR_RATIO, "×")
    print_table(
        f"One small tool three ways (median µs/call). Decorator ÷ class = {ratio:.2f}× "
        f"(target ≤ {DECORATOR_RATIO:.2f}×): {verdict(met)}",
        ["path", "µs/call", "× decorator"],
        rows,
    )
    return ratio


# --- MCP over stdio ---------------------------------------------------------------------------


def _time_server() -> str | None:
    path = Path(sys.executable).parent / "mcp-server-time"
    return str(path) if path.exists() else None


async def mcp_table(targets: Targets) -> float | None:
    """``get_current_time`` through Aptix against a direct ``ClientSession``; Aptix ÷ direct."""
    command = _time_server()
    if command is None:
        print('\n(MCP table skipped: mcp-server-time is not installed; pip install -e ".[test]")')
        return None
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    logger = RecordingLogger()
    registry = AgentToolRegistry(logger)
    source = McpToolSource({"time": McpServerConfig(command=command, approval="never")}, logger)
    await source.start(registry)
    executor = AgentToolExecutor(registry, logger, timeouts=source.tool_timeouts())
    aptix_call = AgentToolCall("call-1", "time_get_current_time", json.dumps(TZ_ARGS))
    try:
        async with AsyncExitStack() as stack:
            with open(os.devnull, "w", encoding="utf-8") as errlog:  # noqa: ASYNC230
                read, write = await stack.enter_async_context(
                    stdio_client(StdioServerParameters(command=command), errlog=errlog)
                )
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()

                async def direct() -> object:
                    result = await session.call_tool("get_current_time", TZ_ARGS)
                    assert not result.is_error
                    return result

                async def through_aptix() -> object:
                    done = await executor.execute(aptix_call, CONTEXT)
                    assert done.result_json is not None, done.error_message
                    return done

                direct_us, aptix_us = await interleaved_us(
                    [direct, through_aptix], batch=50, rounds=30
                )
    finally:
        await source.aclose()
    ratio = aptix_us / direct_us
    met = targets.at_most("Aptix ÷ direct MCP client", ratio, MCP_RATIO, "×")
    rows = [
        ("mcp ClientSession.call_tool, direct", f"{direct_us:.1f}", "1.00×", "—"),
        (
            "Aptix: executor → registered MCP tool → shared session",
            f"{aptix_us:.1f}",
            f"{ratio:.2f}×",
            f"{aptix_us - direct_us:.1f}",
        ),
    ]
    print_table(
        f"MCP tool over stdio, mcp-server-time get_current_time (median µs/call). "
        f"Aptix ÷ direct = {ratio:.2f}× (target ≤ {MCP_RATIO:.2f}×): {verdict(met)}",
        ["path", "µs/call", "× direct", "Aptix overhead µs"],
        rows,
    )
    return ratio


async def _run(targets: Targets) -> None:
    await executor_table(targets)
    await decorator_table(targets)
    await mcp_table(targets)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the three tables; the exit status is 1 when a target was missed."""
    parser = bench_parser("bench.tools", __doc__)
    parser.parse_args(argv)
    targets = Targets("bench.tools")
    asyncio.run(_run(targets))
    return targets.finish()


if __name__ == "__main__":
    raise SystemExit(main())
