"""Requests the edge guards refuse (421, 403, 401 on operations paths) are in /metrics."""

from __future__ import annotations

from pathlib import Path

import httpx

from aptix.api import create_app
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from tests.api.conftest import KEYS, A


def _client(runtime: Runtime, base_url: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=create_app(runtime=runtime))
    return httpx.AsyncClient(transport=transport, base_url=base_url)


async def test_a_keyless_app_counts_the_hosts_and_origins_it_refuses(runtime: Runtime) -> None:
    async with _client(runtime, "http://127.0.0.1:8000") as client:
        for _ in range(3):
            misdirected = await client.get("/v1/sessions", headers={"Host": "attacker.example"})
            assert misdirected.status_code == 421
        forbidden = await client.post(
            "/v1/sessions", json={}, headers={"Origin": "http://evil.example"}
        )
        assert forbidden.status_code == 403
        metrics = (await client.get("/metrics")).text
    assert 'aptix_http_requests_total{method="GET",route="unmatched",status="421"} 3.0' in metrics
    assert 'aptix_http_requests_total{method="POST",route="unmatched",status="403"} 1.0' in metrics


async def test_a_keyed_app_counts_operations_requests_without_a_key(tmp_path: Path) -> None:
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, api_keys=KEYS)
    async with open_runtime(settings) as runtime, _client(runtime, "http://test") as client:
        for path in ("/metrics", "/openapi.json", "/docs"):
            assert (await client.get(path)).status_code == 401
        metrics = (await client.get("/metrics", headers=A)).text
    assert 'aptix_http_requests_total{method="GET",route="unmatched",status="401"} 3.0' in metrics
