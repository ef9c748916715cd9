"""bench/tools.py compares like with like (its timings are printed by the bench, never tested)."""

from __future__ import annotations

import json

from aptix import AgentToolExecutor, AgentToolRegistry
from aptix.testing import RecordingLogger
from aptix.tools import AgentToolCall
from bench.tools import ARGS, CONTEXT, GreetTool, bench_greet


async def test_the_decorated_and_hand_written_tools_are_the_same_tool() -> None:
    logger = RecordingLogger()
    registry = AgentToolRegistry(logger)
    registry.register(bench_greet)
    registry.register(GreetTool)
    executor = AgentToolExecutor(registry, logger)
    results = []
    for name in ("bench_greet", "bench_greet_class"):
        done = await executor.execute(AgentToolCall("c", name, ARGS), CONTEXT)
        assert done.result_json is not None, done.error_message
        results.append(json.loads(done.result_json))
        bad = await executor.execute(AgentToolCall("c", name, "{}"), CONTEXT)
        assert bad.error_message == "Invalid arguments: 'name': field required."
    assert results[0] == results[1] == {"message": "Hello, Ann!", "conversationId": "c"}
    assert bench_greet.schema()["parameters"] == GreetTool.schema()["parameters"]
