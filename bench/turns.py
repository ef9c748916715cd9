"""Persistent turns side by side: Aptix vs LangGraph (``AsyncSqliteSaver``) vs the OpenAI
Agents SDK (``SQLiteSession``), plus ``POST /v1/agent/execute`` under load.

Run: ``python -m bench.turns [--rounds N] [--long-turns N] [--seconds S] [--http]``; all but
``--http`` need the ``bench`` extra (``pip install -e ".[bench]"``). Every framework gets a
zero-latency scripted model and one trivial async tool; each persists to its own SQLite file
in a temporary directory. New-session turns of the three are interleaved one by one, so
machine load hits all alike; each long session runs alone (see ``_long_session``).

- k=0: one model call answering text, on a new session each turn.
  Aptix runs on its SQLite file and, interleaved too, on a fresh PostgreSQL database
  (``tests.databases``: 127.0.0.1:5432 unless ``APTIX_TEST_PG_*`` say otherwise).
- k=10: one model call asking for 10 tool calls, the 10 calls, a second model call; new session.
- long session: one session per framework, ``--long-turns`` (1,000) + 20 k=0 turns; the median
  of the last 20 against the median of turns 1-20.
- HTTP: ``POST /v1/agent/execute`` (new session each) at 16 connections, on SQLite and on
  PostgreSQL, served by ``bench.http_server``. The load comes from ``wrk`` when installed
  (Debian package ``wrk``); otherwise from an httpx client in this process, which competes
  with the server for the same cores and reads lower.
- Processes: the same route from one, two and three processes on one PostgreSQL beside one
  on SQLite (``bench.processes``, also runnable alone).

Targets for Aptix on its SQLite file: k=0 ≤ 0.5× and k=10 ≤ 0.3× the faster peer, the long
session's last turns ≤ 1.2× its first; on PostgreSQL, k=0 ≤ 1.5× SQLite's. Over HTTP on SQLite
≥ 800 turns/s with p99 ≤ 50 ms, and on either database one session's turns 301+ < 1.5× its
turns 1-20; then ``bench.processes``' targets. The exit status is 1 when one is missed (every
miss is listed after the last table), 2 when the bench extra is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from aptix.llm.types import LlmRequest, LlmResponse
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, call, reply
from bench._table import (
    Targets,
    add_rounds,
    add_seconds,
    bench_parser,
    environment_default,
    positive_int,
    print_table,
    verdict,
)

WINDOW = 20
HTTP_LONG = 300
#: The modules of the ``bench`` extra the in-process part imports.
EXTRA = ("langchain_core", "langgraph", "langgraph.checkpoint.sqlite", "agents")
#: The targets (see the module's docstring).
K0_PEER_RATIO = 0.5
K10_PEER_RATIO = 0.3
LONG_RATIO = 1.2
PG_RATIO = 1.5
HTTP_RPS = 800
HTTP_P99_MS = 50
HTTP_LONG_RATIO = 1.5

Turn = Callable[[str], Awaitable[object]]


async def hello(name: str) -> str:
    """The trivial async tool every framework runs."""
    return f"Hello, {name}!"


# --- Aptix ---------------------------------------------------------------------------------


def _aptix_model(k: int) -> FunctionModel:
    calls = [call("agent_hello_world", {"name": "Ann"}, id=f"c{i}") for i in range(k)]

    def answer(request: LlmRequest) -> LlmResponse:
        if k and request.messages[-1]["role"] == "user":
            return reply(None, *calls)
        return reply("done")

    return FunctionModel(answer)


def aptix_turn(runtime: Runtime, k: int) -> tuple[Turn, Callable[[], Awaitable[str]]]:
    """One Aptix turn in session ``sid``, and a factory of new sessions."""
    reasoner = runtime.reasoner(_aptix_model(k))

    async def turn(sid: str) -> object:
        result = await reasoner.execute(session_id=sid, org="o", user="u", instruction="go")
        assert result.kind == "ok", result
        return result

    async def new_session() -> str:
        created = await runtime.services.sessions.create_session(org="o", user="u")
        assert created.result is not None
        return created.result.id

    return turn, new_session


def _in_memory_turn(runtime: Runtime) -> tuple[Turn, Callable[[], Awaitable[str]]]:
    """Aptix with the in-memory session and turn stores: the loop's own cost."""
    from aptix.reasoner import AgentReasoner, InMemoryTurnStore
    from aptix.testing.sessions import InMemorySessionManager

    sessions = memory = InMemorySessionManager(runtime.services.modes)
    reasoner = AgentReasoner(
        model=_aptix_model(0),
        executor=runtime.executor,
        sessions=sessions,
        modes=runtime.services.modes,
        turns=InMemoryTurnStore(memory),
        logger=runtime.logger,
    )

    async def turn(sid: str) -> object:
        return await reasoner.execute(session_id=sid, org="o", user="u", instruction="go")

    async def new_session() -> str:
        created = await sessions.create_session(org="o", user="u")
        assert created.result is not None
        return created.result.id

    return turn, new_session


# --- LangGraph -----------------------------------------------------------------------------


def langgraph_turn(saver: Any, k: int) -> Turn:
    """One LangGraph turn (model node, tools node, model node) on thread ``sid``."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    async def model(state: MessagesState) -> dict[str, Any]:
        if k and isinstance(state["messages"][-1], HumanMessage):
            calls = [{"id": f"c{i}", "name": "hello", "args": {"name": "Ann"}} for i in range(k)]
            return {"messages": [AIMessage(content="", tool_calls=calls)]}
        return {"messages": [AIMessage(content="done")]}

    async def tools(state: MessagesState) -> dict[str, Any]:
        calls = state["messages"][-1].tool_calls  # type: ignore[attr-defined]
        results = await asyncio.gather(*(hello(**c["args"]) for c in calls))
        return {
            "messages": [
                ToolMessage(content=r, tool_call_id=c["id"])
                for c, r in zip(calls, results, strict=True)
            ]
        }

    def route(state: MessagesState) -> str:
        return "tools" if getattr(state["messages"][-1], "tool_calls", None) else END

    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", tools)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    app = graph.compile(checkpointer=saver)

    async def turn(sid: str) -> object:
        config = {"configurable": {"thread_id": sid}}
        out = await app.ainvoke({"messages": [HumanMessage("go")]}, config)  # type: ignore[arg-type]
        assert out["messages"][-1].content == "done"
        return out

    return turn


# --- OpenAI Agents SDK ---------------------------------------------------------------------


def agents_turn(db_path: str, k: int) -> Turn:
    """One OpenAI Agents SDK run with a ``SQLiteSession`` named ``sid``."""
    from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    set_tracing_disabled(True)

    class Scripted(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            items = args[1] if len(args) > 1 else kwargs["input"]
            last = items[-1] if isinstance(items, list) else {"role": "user"}
            output: list[Any]
            if k and isinstance(last, dict) and last.get("role") == "user":
                output = [
                    ResponseFunctionToolCall(
                        type="function_call",
                        call_id=f"c{i}",
                        name="hello",
                        arguments='{"name": "Ann"}',
                        id=f"fc{i}",
                    )
                    for i in range(k)
                ]
            else:
                text = ResponseOutputText(type="output_text", text="done", annotations=[])
                output = [
                    ResponseOutputMessage(
                        id="m", type="message", role="assistant", status="completed", content=[text]
                    )
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    agent = Agent(name="bench", model=Scripted(), tools=[function_tool(hello)])
    sessions: dict[str, Any] = {}

    async def turn(sid: str) -> object:
        session = sessions.get(sid) or sessions.setdefault(sid, SQLiteSession(sid, db_path))
        result = await Runner.run(agent, "go", session=session)
        assert result.final_output == "done", result.final_output
        return result

    return turn


# --- measuring -----------------------------------------------------------------------------


async def _timed(turn: Turn, sid: str) -> float:
    started = time.perf_counter_ns()
    await turn(sid)
    return (time.perf_counter_ns() - started) / 1_000


async def _new_sessions(
    turns: dict[str, Turn], new: dict[str, Callable[[], Awaitable[str]]], rounds: int
) -> dict[str, float]:
    """Median µs of a turn on a new session, the frameworks interleaved turn by turn.

    ``new`` makes the session of the turns named in it (Aptix's); the others get a new id.
    """
    samples: dict[str, list[float]] = {name: [] for name in turns}
    for r in range(rounds + 10):
        for name, turn in turns.items():
            sid = await new[name]() if name in new else uuid.uuid4().hex
            took = await _timed(turn, sid)
            if r >= 10:  # warm-up
                samples[name].append(took)
    return {name: statistics.median(s) for name, s in samples.items()}


async def _long_session(
    turns: dict[str, Turn], aptix_new: Callable[[], Awaitable[str]], long: int
) -> dict[str, tuple[float, float]]:
    """Median µs of the first WINDOW turns and of WINDOW turns after ``long`` turns.

    Each framework runs its whole series alone (not interleaved): the peers' long sessions
    leave large object graphs whose garbage collection would otherwise be billed to whoever
    runs next.
    """
    out = {}
    for name, turn in turns.items():
        sid = await aptix_new() if name.startswith("Aptix") else uuid.uuid4().hex
        gc.collect()
        samples = [await _timed(turn, sid) for _ in range(long + WINDOW)]
        out[name] = (statistics.median(samples[:WINDOW]), statistics.median(samples[long:]))
    return out


class _Counter:
    """SQL statements, transactions, and thread hops (aiosqlite's or ``Database.run``'s) on
    SQLite or round trips to PostgreSQL (asyncpg's messages that wait for an answer)."""

    def __init__(self, runtime: Runtime) -> None:
        import aiosqlite.core
        from sqlalchemy import event

        self.statements = self.transactions = self.hops = 0
        self.active = False
        database = runtime.database
        if not database.is_sqlite:
            self._count_round_trips()
        for engine in (database.engine.sync_engine, database.sync_engine):
            if engine is None:
                continue

            @event.listens_for(engine, "before_cursor_execute")
            def _statement(*_: Any) -> None:
                if self.active:
                    self.statements += 1

            @event.listens_for(engine, "begin")
            def _begin(*_: Any) -> None:
                # On PostgreSQL a statement in autocommit also "begins": BEGINs are counted
                # where asyncpg sends them instead.
                if self.active and database.is_sqlite:
                    self.transactions += 1

        original = aiosqlite.core.Connection._execute
        counter = self

        async def counted(self: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
            if counter.active:
                counter.hops += 1
            return await original(self, fn, *args, **kwargs)

        aiosqlite.core.Connection._execute = counted  # type: ignore[method-assign]
        run = database._run

        def hop(fn: Any) -> Any:  # runs on the worker thread: one hop per transaction
            if counter.active:
                counter.hops += 1
            return run(fn)

        database._run = hop  # type: ignore[method-assign]

    def _count_round_trips(self) -> None:
        """Count asyncpg's waits for the server: BEGIN and COMMIT, prepares, executions."""
        from asyncpg.connection import Connection
        from asyncpg.prepared_stmt import PreparedStatement

        counter = self
        for owner, names in (
            (Connection, ("execute", "prepare", "fetch", "fetchrow", "executemany")),
            (PreparedStatement, ("fetch", "fetchrow", "executemany")),
        ):
            for name in names:
                original = getattr(owner, name)

                async def counted(
                    self: Any, *args: Any, _original: Any = original, **kwargs: Any
                ) -> Any:
                    if counter.active:
                        counter.hops += 1
                        begins = args and isinstance(args[0], str) and args[0].startswith("BEGIN")
                        counter.transactions += bool(begins)
                    return await _original(self, *args, **kwargs)

                setattr(owner, name, counted)


async def _profile(runtime: Runtime) -> list[tuple[object, ...]]:
    counter = _Counter(runtime)
    label = "SQLite" if runtime.database.is_sqlite else "PostgreSQL"
    rows = []
    for k in (0, 10):
        turn, new_session = aptix_turn(runtime, k)
        sid = await new_session()
        await turn(sid)  # warm
        sid = await new_session()
        counter.statements = counter.transactions = counter.hops = 0
        counter.active = True
        await turn(sid)
        counter.active = False
        rows.append((label, f"k={k}", counter.transactions, counter.statements, counter.hops))
    return rows


async def _in_process(targets: Targets, rounds: int, long: int) -> None:
    from tests.databases import create_pg_database, drop_pg_database

    postgresql = await asyncio.to_thread(create_pg_database)
    try:
        await _in_process_on(postgresql, targets, rounds, long)
    finally:
        await asyncio.to_thread(drop_pg_database, postgresql)


async def _in_process_on(postgresql: str, targets: Targets, rounds: int, long: int) -> None:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    with tempfile.TemporaryDirectory() as tmp:
        settings = AptixSettings(
            data_dir=Path(tmp) / "aptix", load_plugins=False, semantic_matching=False
        )
        on_pg = settings.model_copy(update={"database_url": postgresql})
        async with (
            open_runtime(settings) as runtime,
            open_runtime(on_pg) as pg_runtime,
            AsyncSqliteSaver.from_conn_string(str(Path(tmp) / "langgraph.db")) as saver,
        ):
            await saver.setup()
            agents_db = str(Path(tmp) / "agents.db")
            results: dict[int, dict[str, float]] = {}
            for k in (0, 10):
                aptix, aptix_new = aptix_turn(runtime, k)
                aptix_pg, aptix_pg_new = aptix_turn(pg_runtime, k)
                turns = {
                    "Aptix (SQLite file)": aptix,
                    "Aptix (PostgreSQL)": aptix_pg,
                    "LangGraph + AsyncSqliteSaver": langgraph_turn(saver, k),
                    "OpenAI Agents SDK + SQLiteSession": agents_turn(agents_db, k),
                }
                new = {"Aptix (SQLite file)": aptix_new, "Aptix (PostgreSQL)": aptix_pg_new}
                results[k] = await _new_sessions(turns, new, rounds)
            aptix0, aptix_new = aptix_turn(runtime, 0)
            long_turns = await _long_session(
                {
                    "Aptix (SQLite file)": aptix0,
                    "LangGraph + AsyncSqliteSaver": langgraph_turn(saver, 0),
                    "OpenAI Agents SDK + SQLiteSession": agents_turn(agents_db, 0),
                },
                aptix_new,
                long,
            )
            mem_turn, mem_new = _in_memory_turn(runtime)
            mem = await _new_sessions(
                {"Aptix (in memory)": mem_turn}, {"Aptix (in memory)": mem_new}, rounds
            )
            profile = [*await _profile(runtime), *await _profile(pg_runtime)]
    best = {k: min(v for n, v in results[k].items() if not n.startswith("Aptix")) for k in (0, 10)}
    rows = []
    for name in results[0]:
        first, after = long_turns.get(name, (0.0, 0.0))  # no long session on PostgreSQL
        rows.append(
            (
                name,
                f"{results[0][name]:,.0f}",
                f"{results[0][name] / best[0]:.2f}×",
                f"{results[10][name]:,.0f}",
                f"{results[10][name] / best[10]:.2f}×",
                f"{first:,.0f}" if first else "",
                f"{after:,.0f}" if first else "",
                f"{after / first:.2f}×" if first else "",
            )
        )
    reference = f"{mem['Aptix (in memory)']:,.0f}"
    rows.append(("Aptix without persistence (reference)", reference, "", "", "", "", "", ""))
    pg, sqlite = "Aptix (PostgreSQL)", "Aptix (SQLite file)"
    first, after = long_turns[sqlite]
    met = targets.at_most(
        "k=0, Aptix (SQLite file) ÷ faster peer", results[0][sqlite] / best[0], K0_PEER_RATIO, "×"
    )
    met &= targets.at_most(
        "k=10, Aptix (SQLite file) ÷ faster peer",
        results[10][sqlite] / best[10],
        K10_PEER_RATIO,
        "×",
    )
    met &= targets.at_most(
        f"long session, Aptix (SQLite file) turns {long + 1}+ ÷ 1-{WINDOW}",
        after / first,
        LONG_RATIO,
        "×",
    )
    print_table(
        f"Persistent turns, median µs ({rounds} new-session turns each; long session: turns "
        f"{long + 1}-{long + WINDOW} vs 1-{WINDOW}). Targets for Aptix: k=0 ≤ {K0_PEER_RATIO:g}× "
        f"and k=10 ≤ {K10_PEER_RATIO:g}× the faster peer; after {long:,} turns ≤ {LONG_RATIO:g}× "
        f"the first: {verdict(met)}",
        [
            "framework",
            "k=0 µs",
            "vs faster peer",
            "k=10 µs",
            "vs faster peer",
            "turns 1-20 µs",
            f"turns {long + 1}+ µs",
            "ratio",
        ],
        rows,
    )
    met = targets.at_most(
        "k=0, Aptix (PostgreSQL) ÷ Aptix (SQLite file)",
        results[0][pg] / results[0][sqlite],
        PG_RATIO,
        "×",
    )
    print(
        f"Aptix on PostgreSQL vs its SQLite file (same run; target k=0 ≤ {PG_RATIO:g}×): "
        f"k=0 {results[0][pg] / results[0][sqlite]:.2f}×, "
        f"k=10 {results[10][pg] / results[10][sqlite]:.2f}×: {verdict(met)}\n"
    )
    print_table(
        "Aptix database work per turn (new session): explicit transactions (BEGIN), SQL "
        "statements, and thread hops on SQLite or round trips to PostgreSQL",
        ["database", "turn", "transactions", "SQL statements", "hops / round trips"],
        profile,
    )


async def _serve_execute(
    env: dict[str, str], seconds: float
) -> tuple[float, float, float, float, float]:
    """Serve ``bench.http_server`` with ``env``; load ``POST /v1/agent/execute`` at 16
    connections for ``seconds``, then time one session's turns 1-20 and 301-320 over HTTP (ms)."""
    import subprocess

    import httpx

    from bench.http import _load, _wrk
    from tests.api.live import free_port

    port = free_port()
    body: dict[str, object] = {"instruction": "hi"}
    with tempfile.TemporaryDirectory() as tmp:
        environment = {**os.environ, "APTIX_DATA_DIR": tmp, **env}
        environment.pop("APTIX_API_KEYS", None)
        server = subprocess.Popen(  # noqa: ASYNC220
            [sys.executable, "-m", "bench.http_server", str(port)], env=environment
        )
        url = f"http://127.0.0.1:{port}/v1/agent/execute"
        try:
            async with httpx.AsyncClient() as client:
                for _ in range(300):
                    try:
                        await client.post(url, json=body)
                        break
                    except httpx.HTTPError:
                        await asyncio.sleep(0.1)
            if shutil.which("wrk"):
                rate, p50, p99 = await asyncio.to_thread(_wrk, url, body, 16, seconds)
            else:
                rate, p50, p99 = await _load(url, body, 16, seconds)
            await asyncio.sleep(2)  # let the server drain what the load left queued
            async with httpx.AsyncClient(timeout=30) as client:
                first = (await client.post(url, json=body)).json()
                turn = {"sessionId": first["sessionId"], "instruction": "hi"}
                took = []
                for _ in range(HTTP_LONG + WINDOW - 1):
                    started = time.perf_counter()
                    answer = await client.post(url, json=turn)
                    took.append((time.perf_counter() - started) * 1000)
                    assert answer.status_code == 200, answer.text
            early = statistics.median(took[: WINDOW - 1])
            late = statistics.median(took[HTTP_LONG - 1 :])
            return rate, p50, p99, early, late
        finally:
            server.terminate()
            server.wait(timeout=30)


async def _http(targets: Targets, seconds: float) -> None:
    from tests.databases import create_pg_database, drop_pg_database

    rows = []
    met = True
    for label in ("SQLite", "PostgreSQL"):
        database = await asyncio.to_thread(create_pg_database) if label == "PostgreSQL" else None
        try:
            rate, p50, p99, early, late = await _serve_execute(
                {"APTIX_DATABASE_URL": database} if database else {}, seconds
            )
        finally:
            if database:
                await asyncio.to_thread(drop_pg_database, database)
        if label == "SQLite":
            met &= targets.at_least("HTTP on SQLite, turns/s", rate, HTTP_RPS, " turns/s")
            met &= targets.at_most("HTTP on SQLite, p99", p99, HTTP_P99_MS, " ms")
        met &= targets.below(
            f"HTTP on {label}, one session's turns {HTTP_LONG + 1}+ ÷ 1-{WINDOW}",
            late / early,
            HTTP_LONG_RATIO,
            "×",
        )
        rows.append(
            (
                label,
                f"{rate:,.0f}",
                f"{p50:.1f}",
                f"{p99:.1f}",
                f"{early:.2f}",
                f"{late:.2f}",
                f"{late / early:.2f}×",
            )
        )
    print_table(
        "POST /v1/agent/execute: new session each at 16 connections (targets on SQLite: "
        f"≥ {HTTP_RPS:,} turns/s, p99 ≤ {HTTP_P99_MS} ms); one session's turns {HTTP_LONG + 1}+ "
        f"vs 1-{WINDOW} sequentially (target < {HTTP_LONG_RATIO:g}×): {verdict(met)}",
        [
            "database",
            "turns/s",
            "p50 ms",
            "p99 ms",
            "turns 1-20 ms",
            f"turns {HTTP_LONG + 1}+ ms",
            "ratio",
        ],
        rows,
    )


def _missing_extra() -> str | None:
    """What of the ``bench`` extra fails to import, or None when all of it imports."""
    for name in EXTRA:
        try:
            importlib.import_module(name)
        except ImportError as error:
            return str(error)
    return None


async def _run(targets: Targets, args: argparse.Namespace) -> None:
    if not args.http:
        await _in_process(targets, args.rounds, args.long_turns)
    await _http(targets, args.seconds)
    from bench.processes import run as processes

    # One, two and three processes on one PostgreSQL.
    await processes(targets, args.rounds, args.seconds)


def main(argv: Sequence[str] | None = None) -> int:
    """Print every table; the exit status is 1 when a target was missed."""
    parser = bench_parser("bench.turns", __doc__)
    parser.add_argument(
        "--http",
        action="store_true",
        help="only the HTTP and processes parts (no bench extra needed)",
    )
    add_rounds(parser, "new-session turns per framework and k")
    parser.add_argument(
        "--long-turns",
        type=positive_int,
        default=environment_default("BENCH_LONG_TURNS", "1000"),
        help=f"turns before the long session's last {WINDOW} (default: BENCH_LONG_TURNS or 1000)",
    )
    add_seconds(parser, "load of the HTTP rows")
    args = parser.parse_args(argv)
    if not args.http and (missing := _missing_extra()) is not None:
        # One line, not a traceback: the fix is an install, and --http needs none of it.
        print(
            f'{parser.prog}: needs the bench extra ({missing}): pip install -e ".[bench]" '
            "(or --http for the HTTP part alone)",
            file=sys.stderr,
        )
        return 2
    targets = Targets("bench.turns")
    asyncio.run(_run(targets, args))
    return targets.finish()


if __name__ == "__main__":
    raise SystemExit(main())
