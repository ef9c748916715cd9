"""Another process holding the SQLite file's write lock: requests wait one busy timeout at most.

The lock is taken for real (``BEGIN IMMEDIATE`` on a second connection to the file, as the
``sqlite3`` shell or a backup script would). Requests queued behind it in this process share
no wait: each answers 503 ``database_unavailable`` once its own busy timeout has run out,
whatever its place in the queue, and ``/healthz`` does not queue at all.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aptix.api import create_app
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import ScriptedModel

#: Short for the test; the served default is 30 s.
BUSY_TIMEOUT = 2.0


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, semantic_matching=False)
    async with open_runtime(settings) as opened:
        opened.database.busy_timeout = BUSY_TIMEOUT
        yield opened


@pytest.fixture
async def api(runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    # The model is never reached: the turn cannot be claimed.
    transport = httpx.ASGITransport(app=create_app(runtime=runtime, model=ScriptedModel()))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client


async def _timed(
    api: httpx.AsyncClient, method: str, path: str, body: dict[str, Any] | None
) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = await api.request(method, path, json=body)
    return response, time.monotonic() - started


async def test_requests_behind_a_lock_held_elsewhere_get_503_within_the_busy_timeout(
    api: httpx.AsyncClient, tmp_path: Path
) -> None:
    session = (await api.post("/v1/sessions", json={})).json()["sessionId"]
    other = sqlite3.connect(tmp_path / "aptix.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        routes = [
            ("GET", "/v1/sessions", None),
            ("GET", f"/v1/sessions/{session}", None),
            ("POST", "/v1/sessions", {}),
            ("POST", f"/v1/sessions/{session}/workflow/cancel", None),
            ("POST", "/v1/agent/execute", {"sessionId": session, "instruction": "hi"}),
        ]
        queued = [_timed(api, *route) for route in routes]
        # Without a deadline for the queue they answered one after another, a busy timeout
        # each (and /healthz after all of them): this bound fails at once instead.
        *answers, (health, health_took) = await asyncio.wait_for(
            asyncio.gather(*queued, _timed(api, "GET", "/healthz", None)), timeout=4 * BUSY_TIMEOUT
        )
        for (method, path, _), (response, took) in zip(routes, answers, strict=True):
            assert response.status_code == 503, (method, path, response.text)
            assert response.json()["error"]["code"] == "database_unavailable"
            assert response.headers["Retry-After"] == "5"
            assert took < BUSY_TIMEOUT + 1.0, (method, path, took)
        # Reads in WAL mode do not wait for a writer: the health check answers at once.
        assert health.status_code == 200, health.text
        assert health_took < BUSY_TIMEOUT / 2, health_took
    finally:
        other.execute("ROLLBACK")
        other.close()
    # Once the lock is released the same requests are served, without a restart.
    assert (await api.get(f"/v1/sessions/{session}")).status_code == 200
    assert (await api.post("/v1/sessions", json={})).status_code == 201
