"""Reasoner overhead per turn with a zero-latency scripted model.

Run: ``python -m bench.reasoner``. k tool calls (``agent_hello_world``) arrive in one model
response, then the model answers with text. "Persistence off" keeps sessions and turns in
memory; "SQLite" uses the real stores on a temporary file. Targets, without persistence: one
more round trip (k=1 against k=0) ≤ 650 µs and each further tool call ≤ 60 µs; the exit status
is 1 when either is missed.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Sequence

from aptix.llm.types import LlmRequest, LlmResponse
from aptix.reasoner import AgentReasoner, InMemoryTurnStore
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, call, reply
from aptix.testing.sessions import InMemorySessionManager
from bench._table import Targets, bench_parser, print_table, verdict

TURNS = {0: 400, 1: 300, 10: 100}
#: Turns per k with SQLite, which are slower: a tenth, at least this many.
PERSISTENT_TURNS = 20
#: Targets without persistence (µs): k=1 over k=0, and each tool call from k=1 to k=10.
ROUND_TRIP_US = 650
MARGINAL_US = 60


def _model(k: int) -> FunctionModel:
    calls = [call("agent_hello_world", {"name": "Ann"}, id=f"c{i}") for i in range(k)]

    def answer(request: LlmRequest) -> LlmResponse:
        if k and request.messages[-1]["role"] == "user":
            return reply(None, *calls)
        return reply("done")

    return FunctionModel(answer)


async def _per_turn_us(runtime: Runtime, k: int, persistent: bool) -> float:
    model = _model(k)
    if persistent:
        reasoner = runtime.reasoner(model)
        sessions = runtime.services.sessions
    else:
        memory = InMemorySessionManager(runtime.services.modes)
        sessions = memory  # type: ignore[assignment]
        reasoner = AgentReasoner(
            model=model,
            executor=runtime.executor,
            sessions=memory,
            modes=runtime.services.modes,
            turns=InMemoryTurnStore(memory),
            logger=runtime.logger,
            boot_message=lambda _org: "",
        )
    n = TURNS[k] if not persistent else max(PERSISTENT_TURNS, TURNS[k] // 10)
    ids = []
    for _ in range(n + 5):
        created = await sessions.create_session(org="o", user="u")
        assert created.result is not None
        ids.append(created.result.id)
    samples = []
    for i, session_id in enumerate(ids):
        start = time.perf_counter_ns()
        result = await reasoner.execute(session_id=session_id, org="o", user="u", instruction="go")
        if i >= 5:  # warm-up
            samples.append((time.perf_counter_ns() - start) / 1_000)
        assert result.kind == "ok", result
    return statistics.median(samples)


async def _run(targets: Targets) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        settings = AptixSettings(data_dir=tmp, load_plugins=False, semantic_matching=False)
        async with open_runtime(settings) as runtime:
            rows = []
            met = True
            for label, persistent in (("off (in memory)", False), ("SQLite", True)):
                t = {k: await _per_turn_us(runtime, k, persistent) for k in (0, 1, 10)}
                round_trip, marginal = t[1] - t[0], (t[10] - t[1]) / 9
                if not persistent:
                    row = f"persistence {label}"
                    met &= targets.at_most(
                        f"+1 round trip, {row}", round_trip, ROUND_TRIP_US, " µs"
                    )
                    met &= targets.at_most(
                        f"marginal tool call, {row}", marginal, MARGINAL_US, " µs"
                    )
                rows.append(
                    (
                        label,
                        f"{t[0]:.0f}",
                        f"{t[1]:.0f}",
                        f"{t[10]:.0f}",
                        f"{round_trip:.0f}",
                        f"{marginal:.0f}",
                    )
                )
    print_table(
        "Reasoner, median µs per turn (targets without persistence: +1 round trip "
        f"≤ {ROUND_TRIP_US:,}, marginal tool call ≤ {MARGINAL_US:,}): {verdict(met)}",
        ["persistence", "k=0", "k=1", "k=10", "+1 round trip", "marginal tool call"],
        rows,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table; the exit status is 1 when a target was missed."""
    parser = bench_parser("bench.reasoner", __doc__)
    parser.parse_args(argv)
    targets = Targets("bench.reasoner")
    asyncio.run(_run(targets))
    return targets.finish()


if __name__ == "__main__":
    raise SystemExit(main())
