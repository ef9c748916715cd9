"""``set_session_mode`` latency and throughput on SQLite and PostgreSQL.

Run: ``python -m bench.sessions``. Each back end gets a fresh database; one caller and eight
concurrent callers change the mode of one session each (so callers do not queue on one row
lock), then eight callers share one session (the worst case: every change waits for the lock).
It states no target: its figures are for comparing back ends and runs.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from aptix.db.engine import open_database
from aptix.modes.catalog import load_mode_catalog
from aptix.sessions.sql import SqlSessionManager
from bench._table import Targets, bench_parser, print_table
from tests.databases import create_pg_database, drop_pg_database

CHANGES_PER_CALLER = 150
MODES = ("calculation", "general")


async def _caller(manager: SqlSessionManager, session_id: str, n: int) -> list[float]:
    latencies = []
    for i in range(n):
        start = time.perf_counter()
        result = await manager.set_session_mode(session_id, MODES[i % 2], "bench", "o", "u")
        latencies.append(time.perf_counter() - start)
        assert result.successful, result.error_message
    return latencies


async def _scenario(url: str, callers: int, shared: bool) -> tuple[float, float, float]:
    database = await open_database(url)
    manager = SqlSessionManager(database, load_mode_catalog())
    try:
        ids = []
        for _ in range(1 if shared else callers):
            created = await manager.create_session(org="o", user="u")
            assert created.result is not None
            ids.append(created.result.id)
        await _caller(manager, ids[0], 20)  # warm the pool
        start = time.perf_counter()
        per_caller = await asyncio.gather(
            *(_caller(manager, ids[0 if shared else i], CHANGES_PER_CALLER) for i in range(callers))
        )
        elapsed = time.perf_counter() - start
    finally:
        await database.close()
    latencies = sorted(x for row in per_caller for x in row)
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    return statistics.median(latencies) * 1000, p99 * 1000, len(latencies) / elapsed


async def _all(tmp: str, pg_url: str) -> list[tuple[str, ...]]:
    rows = []
    for backend, make_url in (
        ("SQLite", lambda n: f"sqlite+aiosqlite:///{Path(tmp) / f'bench{n}.db'}"),
        ("PostgreSQL", lambda n: pg_url),
    ):
        for n, (callers, shared) in enumerate(((1, False), (8, False), (8, True))):
            p50, p99, rate = await _scenario(make_url(n), callers, shared)
            label = f"{callers} caller{'s' if callers > 1 else ''}"
            label += ", one shared session" if shared else ""
            rows.append((backend, label, f"{p50:.2f}", f"{p99:.2f}", f"{rate:,.0f}"))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table (no target: the exit status says only that it ran)."""
    parser = bench_parser("bench.sessions", __doc__)
    parser.parse_args(argv)
    pg_url = create_pg_database()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rows = asyncio.run(_all(tmp, pg_url))
    finally:
        drop_pg_database(pg_url)
    print_table(
        f"set_session_mode ({CHANGES_PER_CALLER} changes per caller; no target)",
        ["back end", "callers", "p50 ms", "p99 ms", "changes/s"],
        rows,
    )
    return Targets("bench.sessions").finish("it states none: compare back ends and runs")


if __name__ == "__main__":
    raise SystemExit(main())
