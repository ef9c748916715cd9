"""``/healthz`` and ``/metrics`` show whether the limits reach Redis, and what they refused.

During a Redis outage the limits are off (``open``) or refuse everything (``closed``), yet
``/healthz`` answered ``{"status": "ok"}`` and ``/metrics`` had no limits series: one log
line per process was all that told an operator. Health stays ``ok`` (a restart does not
bring Redis back, and ``open`` serves every request); its ``limits`` say what is going on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import httpx
import pytest

from aptix.api import create_app
from aptix.llm.types import Usage
from aptix.quotas import Quotas
from aptix.quotas.holds import Hold
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from tests.api.tcp_proxy import TcpProxy


@pytest.mark.parametrize(("mode", "status"), [("open", 200), ("closed", 503)])
async def test_health_stays_ok_and_says_the_limits_lost_redis(
    tmp_path: Path,
    redis_proxy: TcpProxy,
    prefix: str,
    mode: Literal["open", "closed"],
    status: int,
) -> None:
    settings = AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        semantic_matching=False,
        rate_limit="1/minute",
        redis_url=f"redis://127.0.0.1:{redis_proxy.port}/0",
        redis_key_prefix=prefix,
        limits_when_redis_down=mode,
    )
    async with open_runtime(settings) as runtime:
        transport = httpx.ASGITransport(app=create_app(runtime=runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as api:
            health = (await api.get("/healthz")).json()
            assert health["limits"] == {"store": "redis", "redisUp": True, "whenRedisDown": mode}
            assert (await api.get("/v1/modes")).status_code == 200
            assert (await api.get("/v1/modes")).status_code == 429
            metrics = (await api.get("/metrics")).text
            assert "aptix_limits_redis_up 1.0" in metrics
            assert 'aptix_limits_refusals_total{code="rate_limited"} 1.0' in metrics

            redis_proxy.stop()
            assert (await api.get("/v1/modes")).status_code == status
            health_answer = await api.get("/healthz")
            metrics = (await api.get("/metrics")).text
    assert health_answer.status_code == 200
    assert health_answer.json()["status"] == "ok"
    assert health_answer.json()["limits"]["redisUp"] is False
    assert "aptix_limits_redis_up 0.0" in metrics
    unavailable = 'aptix_limits_refusals_total{code="limits_unavailable"} 1.0'
    assert (unavailable in metrics) == (mode == "closed")


async def test_limits_counting_in_memory_have_no_redis_to_report(tmp_path: Path) -> None:
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, rate_limit="1/minute")
    async with open_runtime(settings) as runtime:
        transport = httpx.ASGITransport(app=create_app(runtime=runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as api:
            health = (await api.get("/healthz")).json()
            metrics = (await api.get("/metrics")).text
    assert health["limits"] == {"store": "memory", "redisUp": None, "whenRedisDown": "open"}
    assert "aptix_limits_redis_up" not in metrics
    assert "# TYPE aptix_limits_refusals_total counter" in metrics


async def test_only_the_refusals_a_caller_gets_count_as_limits_unavailable(
    redis_proxy: TcpProxy, prefix: str
) -> None:
    # Ending a call or a turn, or reading the budget, while Redis is out refuses no one.
    quotas = Quotas(
        rate_limit="100/minute",
        max_concurrent_turns=2,
        token_budget="100000/hour",
        redis_url=f"redis://127.0.0.1:{redis_proxy.port}/0",
        key_prefix=prefix,
        fail_open=False,
    )
    try:
        assert await quotas.enter_turn("acme") is None
        spent, released = await quotas.reserve("acme", 50), await quotas.reserve("acme", 50)
        assert isinstance(spent, Hold)
        assert isinstance(released, Hold)
        redis_proxy.stop()
        state = await quotas.budget_state("acme")
        assert state == {"limit": "100000/hour", "remaining": None, "resetSeconds": None}
        await quotas.spend("acme", "key-1", "ann", Usage(10, 5), held=spent)
        await quotas.release("acme", released)
        await quotas.leave_turn("acme")
        assert quotas.redis_up is False
        assert quotas.refused["limits_unavailable"] == 0

        refusal = await quotas.request("key-1")
        assert refusal is not None
        assert refusal.code == "limits_unavailable"
        assert quotas.refused["limits_unavailable"] == 1
    finally:
        await quotas.aclose()
