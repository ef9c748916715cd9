"""Served API under load: req/s and latency at 1, 16 and 64 connections, RSS, ``--help`` time.

Run: ``python -m bench.http``. The server is ``bench.http_server`` (uvicorn, one process, a
zero-latency in-process model) on 127.0.0.1 with a fresh data directory. The load generator
is ``wrk`` when installed (Debian package ``wrk``), otherwise an httpx async client in this
process; on a two-core machine generator and server share the CPU either way.

Targets: invoke at 16 connections ≥ 2,000 req/s with p99 ≤ 20 ms (the concurrency of
``bench.turns``' HTTP target), server RSS ≤ 150 MB, ``aptix --help`` ≤ 300 ms. The exit status
is 1 when one is missed; every miss is listed after the last table.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
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
    add_seconds,
    bench_parser,
    print_table,
    verdict,
)
from tests.api.live import free_port

#: The targets: invoke at TARGET_CONNECTIONS, and the process figures.
TARGET_CONNECTIONS = 16
INVOKE_RPS = 2_000
INVOKE_P99_MS = 20
RSS_MB = 150
HELP_MS = 300


async def _load(
    url: str, body: dict[str, object], connections: int, seconds: float
) -> tuple[float, float, float]:
    latencies: list[float] = []
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        stop = time.perf_counter() + seconds

        async def worker() -> None:
            while time.perf_counter() < stop:
                started = time.perf_counter()
                response = await client.post(url, json=body)
                latencies.append(time.perf_counter() - started)
                assert response.status_code == 200, response.text

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(connections)))
        elapsed = time.perf_counter() - began
    latencies.sort()
    p99 = latencies[max(0, int(len(latencies) * 0.99) - 1)]
    return len(latencies) / elapsed, statistics.median(latencies) * 1000, p99 * 1000


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _help_ms() -> float:
    runs = []
    for _ in range(5):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "aptix", "--help"], capture_output=True, check=True)
        runs.append((time.perf_counter() - started) * 1000)
    return statistics.median(runs)


def _wrk_unit(text: str) -> float:
    for unit, factor in (("us", 0.001), ("ms", 1.0), ("s", 1000.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * factor
    return float(text)


def _wrk(
    url: str, body: dict[str, object], connections: int, seconds: float
) -> tuple[float, float, float]:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(
            'wrk.method = "POST"\n'
            f"wrk.body = {json.dumps(json.dumps(body))}\n"
            'wrk.headers["Content-Type"] = "application/json"\n'
        )
    threads = min(2, connections)
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds:g}s", "--latency", "-s",
         script.name, url],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    os.unlink(script.name)
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = _wrk_unit(re.search(r"\s50%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    p99 = _wrk_unit(re.search(r"\s99%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    assert errors is None, out
    return rate, p50, p99


async def _serve_and_load(
    scenarios: tuple[tuple[str, str, dict[str, object]], ...], seconds: float, *extra: str
) -> tuple[list[tuple[object, ...]], float, dict[tuple[str, int], tuple[float, float]]]:
    """The rows, the server's RSS, and (req/s, p99 ms) by (route, connections)."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "APTIX_DATA_DIR": tmp}
        env.pop("APTIX_API_KEYS", None)
        command = [sys.executable, "-m", "bench.http_server", str(port), *extra]
        server = subprocess.Popen(command, env=env)  # noqa: ASYNC220
        base = f"http://127.0.0.1:{port}"
        try:
            async with httpx.AsyncClient() as client:
                for _ in range(300):
                    try:
                        await client.post(f"{base}{scenarios[0][1]}", json=scenarios[0][2])
                        break
                    except httpx.HTTPError:
                        await asyncio.sleep(0.1)
            rows: list[tuple[object, ...]] = []
            figures: dict[tuple[str, int], tuple[float, float]] = {}
            for label, path, body in scenarios:
                for connections in (1, 16, 64):
                    if shutil.which("wrk"):
                        rate, p50, p99 = await asyncio.to_thread(
                            _wrk, base + path, body, connections, seconds
                        )
                    else:
                        rate, p50, p99 = await _load(base + path, body, connections, seconds)
                    figures[label, connections] = (rate, p99)
                    rows.append((label, connections, f"{rate:,.0f}", f"{p50:.1f}", f"{p99:.1f}"))
            rss = _rss_mb(server.pid)
        finally:
            server.terminate()
            server.wait(timeout=30)
    return rows, rss, figures


async def _run(targets: Targets, seconds: float) -> None:
    invoke = ("/v1/tools/agent_hello_world/invoke", {"arguments": {"name": "Ann"}})
    floor_rows, _, _ = await _serve_and_load(
        (("floor: bare FastAPI POST", *invoke),), seconds, "floor"
    )
    rows, rss, figures = await _serve_and_load(
        (
            ("invoke agent_hello_world", *invoke),
            ("agent/execute (new session each)", "/v1/agent/execute", {"instruction": "hi"}),
        ),
        seconds,
    )
    rate, p99 = figures["invoke agent_hello_world", TARGET_CONNECTIONS]
    row = f"invoke at {TARGET_CONNECTIONS} connections"
    met = targets.at_least(f"{row}, req/s", rate, INVOKE_RPS, " req/s")
    met &= targets.at_most(f"{row}, p99", p99, INVOKE_P99_MS, " ms")
    print_table(
        f"HTTP API under load ({seconds:g} s per row; targets: invoke at {TARGET_CONNECTIONS} "
        f"connections ≥ {INVOKE_RPS:,} req/s, p99 ≤ {INVOKE_P99_MS} ms): {verdict(met)}",
        ["route", "connections", "req/s", "p50 ms", "p99 ms"],
        floor_rows + rows,
    )
    help_ms = _help_ms()
    met = targets.at_most("server RSS after the run", rss, RSS_MB, " MB")
    met &= targets.at_most("aptix --help (median of 5)", help_ms, HELP_MS, " ms")
    print_table(
        f"Process figures (targets: RSS ≤ {RSS_MB} MB, aptix --help ≤ {HELP_MS} ms): "
        f"{verdict(met)}",
        ["figure", "value"],
        [
            ("server RSS after the run", f"{rss:.0f} MB"),
            ("aptix --help (median of 5)", f"{help_ms:.0f} ms"),
        ],
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Print both tables; the exit status is 1 when a target was missed."""
    parser = bench_parser("bench.http", __doc__)
    add_seconds(parser, "load per row")
    args = parser.parse_args(argv)
    targets = Targets("bench.http")
    asyncio.run(_run(targets, args.seconds))
    return targets.finish()


if __name__ == "__main__":
    raise SystemExit(main())
