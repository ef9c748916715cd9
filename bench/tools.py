"""Executor dispatch cost for ``agent_hello_world``-sized work against a hand-written floor.

Run: ``python -m bench.tools``. The floor is what any implementation must do: validate the
arguments JSON with a ``TypeAdapter`` and call a function that builds the JSON result. The
executor path adds tool lookup, the timeout scope, error mapping and the ``AgentToolCall`` copy.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from pydantic import TypeAdapter

from aptix import AgentToolExecutor, AgentToolRegistry
from aptix.testing import RecordingLogger
from aptix.tools import AgentToolCall, AgentToolExecutionContext
from aptix.tools.builtin.hello_world import HelloWorldTool
from bench._table import interleaved_us, print_table

ARGS = '{"name": "Ann"}'
CONTEXT = AgentToolExecutionContext(session_id="s" * 32, conversation_id="c", org="o", user="u")


@dataclass
class _FloorArgs:
    name: str


async def main() -> None:
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
        "Executor path, agent_hello_world (median µs/call; target: dispatch ≤ 3 µs, ≤ 3× floor)",
        ["path", "µs/call", "× floor", "dispatch µs"],
        rows,
    )


if __name__ == "__main__":
    asyncio.run(main())
