"""A k=0 persistent turn on PostgreSQL against SQLite, and ``POST /v1/agent/execute`` from
one, two and three ``aptix serve`` processes on one PostgreSQL beside one process on SQLite.

Run: ``python -m bench.processes``. Each process is ``bench.http_server`` (a zero-latency
scripted model); 16 connections in all are spread over the processes and every turn opens a
new session, as in ``bench.turns``. The load comes from ``wrk`` when installed, otherwise from
an httpx client in this process, which competes with the servers for the same cores.

Targets: the k=0 turn on PostgreSQL ≤ 1.5× SQLite's, and PostgreSQL's turns/s from each number
of processes ≥ 0.6× SQLite's. The exit status is 1 when one is missed; every miss is listed
after the last table.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from bench._table import (
    Targets,
    add_rounds,
    add_seconds,
    bench_parser,
    print_table,
    verdict,
)
from bench.http import _load, _wrk
from tests.api.live import free_port
from tests.databases import create_pg_database, drop_pg_database

CONNECTIONS = 16
BODY: dict[str, object] = {"instruction": "hi"}
#: The targets: PostgreSQL's k=0 turn ÷ SQLite's at most, its turns/s ÷ SQLite's at least.
TURN_RATIO = 1.5
RATE_RATIO = 0.6


async def _ready(url: str) -> None:
    async with httpx.AsyncClient() as client:
        for _ in range(600):
            try:
                await client.post(url, json=BODY)
                return
            except httpx.HTTPError:
                await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} did not start")


async def _measure(
    env: dict[str, str], processes: int, seconds: float
) -> tuple[float, float, float]:
    """Turns/s summed over the processes under ``seconds`` of load; median p50, worst p99 (ms)."""
    servers: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmp:
        environment = {**os.environ, "APTIX_DATA_DIR": tmp, **env}
        environment.pop("APTIX_API_KEYS", None)
        urls = []
        try:
            for _ in range(processes):
                port = free_port()
                servers.append(
                    subprocess.Popen(  # noqa: ASYNC220
                        [sys.executable, "-m", "bench.http_server", str(port)], env=environment
                    )
                )
                urls.append(f"http://127.0.0.1:{port}/v1/agent/execute")
                await _ready(urls[-1])  # one at a time: the first migrates the database
            shares = [
                CONNECTIONS // processes + (i < CONNECTIONS % processes) for i in range(processes)
            ]
            if shutil.which("wrk"):
                runs = [
                    asyncio.to_thread(_wrk, u, BODY, c, seconds)
                    for u, c in zip(urls, shares, strict=True)
                ]
            else:
                runs = [_load(u, BODY, c, seconds) for u, c in zip(urls, shares, strict=True)]
            results = await asyncio.gather(*runs)
        finally:
            for server in servers:
                server.terminate()
            for server in servers:
                server.wait(timeout=30)
    rate = sum(r[0] for r in results)
    return rate, statistics.median(r[1] for r in results), max(r[2] for r in results)


async def _k0_turns(targets: Targets, rounds: int) -> None:
    """Median µs of a k=0 turn on a new session, SQLite file and PostgreSQL interleaved."""
    from aptix.runtime import open_runtime
    from aptix.settings import AptixSettings
    from aptix.testing import FunctionModel, reply

    database = await asyncio.to_thread(create_pg_database)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            opened = {}
            for label, url in (("SQLite file", None), ("PostgreSQL", database)):
                settings = AptixSettings(
                    data_dir=Path(tmp) / label,
                    load_plugins=False,
                    semantic_matching=False,
                    database_url=url,
                )
                opened[label] = open_runtime(settings)
            runtimes = {label: await cm.__aenter__() for label, cm in opened.items()}
            try:
                samples: dict[str, list[float]] = {label: [] for label in runtimes}
                reasoners = {
                    label: rt.reasoner(FunctionModel(lambda r: reply("done")))
                    for label, rt in runtimes.items()
                }
                for r in range(rounds + 10):
                    for label, runtime in runtimes.items():
                        made = await runtime.services.sessions.create_session(org="o", user="u")
                        assert made.result is not None
                        started = time.perf_counter()
                        await reasoners[label].execute(
                            session_id=made.result.id, org="o", user="u", instruction="go"
                        )
                        if r >= 10:
                            samples[label].append((time.perf_counter() - started) * 1e6)
            finally:
                for cm in opened.values():
                    await cm.__aexit__(None, None, None)
    finally:
        await asyncio.to_thread(drop_pg_database, database)
    sqlite = statistics.median(samples["SQLite file"])
    pg = statistics.median(samples["PostgreSQL"])
    met = targets.at_most("k=0 turn, PostgreSQL ÷ SQLite", pg / sqlite, TURN_RATIO, "×")
    print_table(
        f"Aptix k=0 persistent turn, median µs ({rounds} new-session turns each, interleaved; "
        f"target: PostgreSQL ≤ {TURN_RATIO:g}× SQLite): {verdict(met)}",
        ["database", "k=0 µs", "vs SQLite"],
        [
            ("SQLite file", f"{sqlite:,.0f}", "1.00×"),
            ("PostgreSQL", f"{pg:,.0f}", f"{pg / sqlite:.2f}×"),
        ],
    )


async def run(targets: Targets, rounds: int, seconds: float) -> None:
    """Print both tables, checking their targets; ``seconds``: the load of each row."""
    await _k0_turns(targets, rounds)
    rows = []
    met = True
    sqlite_rate, p50, p99 = await _measure({}, 1, seconds)
    rows.append(("SQLite", "1", f"{sqlite_rate:,.0f}", f"{p50:.1f}", f"{p99:.1f}", "1.00×"))
    for processes in (1, 2, 3):
        database = await asyncio.to_thread(create_pg_database)
        try:
            rate, p50, p99 = await _measure({"APTIX_DATABASE_URL": database}, processes, seconds)
        finally:
            await asyncio.to_thread(drop_pg_database, database)
        row = (
            f"turns/s, PostgreSQL from {processes} process{'es' if processes > 1 else ''} ÷ SQLite"
        )
        met &= targets.at_least(row, rate / sqlite_rate, RATE_RATIO, "×")
        ratio = f"{rate / sqlite_rate:.2f}×"
        rows.append(
            ("PostgreSQL", str(processes), f"{rate:,.0f}", f"{p50:.1f}", f"{p99:.1f}", ratio)
        )
    print_table(
        f"POST /v1/agent/execute, new session each, {CONNECTIONS} connections over the processes "
        f"(target: PostgreSQL ≥ {RATE_RATIO:g}× SQLite's turns/s): {verdict(met)}",
        ["database", "processes", "turns/s", "p50 ms", "p99 ms", "vs SQLite"],
        rows,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Print both tables; the exit status is 1 when a target was missed."""
    parser = bench_parser("bench.processes", __doc__)
    add_rounds(parser, "new-session k=0 turns per database")
    add_seconds(parser, "load per row")
    args = parser.parse_args(argv)
    targets = Targets("bench.processes")
    asyncio.run(run(targets, args.rounds, args.seconds))
    return targets.finish()


if __name__ == "__main__":
    raise SystemExit(main())
