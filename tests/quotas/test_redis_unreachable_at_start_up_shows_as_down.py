"""A Redis that does not answer at start-up shows as down, and is logged, from then on.

The start-up ``ping`` failed silently: ``/healthz`` said ``redisUp: true`` and ``/metrics``
``aptix_limits_redis_up 1.0`` until a request came in, so an idle process with a wrong
``APTIX_REDIS_URL`` looked healthy to monitoring, though that ping was the last call it made.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from aptix.api import create_app
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port of this fixer's range held bound but not listening: a connection is refused."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        holder.bind(("127.0.0.1", 19340))
        yield holder.getsockname()[1]
    finally:
        holder.close()


async def test_health_and_metrics_say_redis_is_down_before_any_request(
    tmp_path: Path, closed_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    settings = AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        semantic_matching=False,
        rate_limit="5/minute",
        redis_url=f"redis://127.0.0.1:{closed_port}/0",
        limits_when_redis_down="closed",
    )
    # Opening the runtime stops ``aptix`` propagating; a handler on the limits' own logger stays.
    quotas_log = logging.getLogger("aptix.quotas")
    quotas_log.addHandler(caplog.handler)
    try:
        async with open_runtime(settings) as runtime:
            transport = httpx.ASGITransport(app=create_app(runtime=runtime))
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as api:
                health = (await api.get("/healthz")).json()
                metrics = (await api.get("/metrics")).text
                assert runtime.quotas.redis_up is False
                # Within the cool-off the request is refused at once; the outage is not
                # logged a second time.
                refused = await api.get("/v1/modes")
    finally:
        quotas_log.removeHandler(caplog.handler)
    assert health["status"] == "ok"
    assert health["limits"] == {"store": "redis", "redisUp": False, "whenRedisDown": "closed"}
    assert "aptix_limits_redis_up 0.0" in metrics
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "limits_unavailable"
    outages = [
        r.getMessage()
        for r in caplog.records
        if r.name == "aptix.quotas" and "[Quotas_Redis__Unavailable]" in r.getMessage()
    ]
    assert len(outages) == 1, outages
    assert "ConnectionError" in outages[0]
