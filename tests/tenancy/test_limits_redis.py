"""Limits shared through a real Redis by two ``aptix serve`` processes, and a Redis that is gone."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from aptix.api import create_app
from aptix.llm.types import Usage
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import reply
from aptix.testing.server import ScriptedOpenAIServer
from tests.api.live import free_port, served_many
from tests.logs import records_of
from tests.tenancy.conftest import bearer

REDIS = "redis://127.0.0.1:6379/0"
KEYS = "k-ann=acme:ann,k-amy=acme:amy,k-root=acme:root:admin"


@pytest.fixture
def prefix() -> Iterator[str]:
    """A key prefix of this test's own; its keys are deleted afterwards."""
    name = f"aptix-test-{uuid.uuid4().hex}"
    yield name
    client = redis.Redis.from_url(REDIS)
    keys = list(client.scan_iter(f"{name}:*"))
    if keys:
        client.delete(*keys)
    client.close()


def test_two_processes_share_rate_limits_token_budgets_and_usage(
    tmp_path: Path, prefix: str
) -> None:
    redis.Redis.from_url(REDIS).ping()  # the test needs the real Redis: fail, never skip
    env = {
        "APTIX_API_KEYS": KEYS,
        "APTIX_REDIS_URL": REDIS,
        "APTIX_REDIS_KEY_PREFIX": prefix,
        "APTIX_RATE_LIMIT": "6/minute",
        "APTIX_TOKEN_BUDGET": "100/day",
        "APTIX_LLM_MODEL": "scripted",
        "APTIX_LLM_MAX_RETRIES": "0",
        "APTIX_SEMANTIC_MATCHING": "false",
        "APTIX_LOAD_PLUGINS": "false",
    }
    for name in ("one", "two"):  # a database each: only Redis is shared
        (tmp_path / name).mkdir()
    with ScriptedOpenAIServer() as model:
        model.respond = lambda body: reply("ok", usage=Usage(30, 10))
        env["APTIX_LLM_BASE_URL"] = model.base_url
        # Started together: the second start need not wait for the first.
        with served_many([tmp_path / "one", tmp_path / "two"], **env) as both:
            one, two = (running.url for running in both)
            ann = bearer("k-ann")
            for url in (one, two, one, two, one, two):
                assert httpx.get(f"{url}/v1/modes", headers=ann).status_code == 200
            refused = httpx.get(f"{one}/v1/modes", headers=ann)
            assert refused.status_code == 429, refused.text
            assert refused.headers["RateLimit-Policy"] == '"requests";q=6;w=60'
            assert refused.headers["RateLimit"].startswith('"requests";r=0;t=')
            assert int(refused.headers["Retry-After"]) >= 1

            amy = bearer("k-amy")
            turn = {"instruction": "hello"}
            for url in (one, two, one):  # 40 tokens each: 80 is under 100, 120 is over
                done = httpx.post(f"{url}/v1/agent/execute", json=turn, headers=amy)
                assert done.json()["kind"] == "ok", done.text
            over = httpx.post(f"{two}/v1/agent/execute", json=turn, headers=amy)
            assert over.status_code == 429, over.text
            assert over.json()["error"]["code"] == "token_budget_exhausted"
            assert over.headers["RateLimit-Policy"] == '"tokens";q=100;w=86400'

            usage = httpx.get(f"{two}/v1/usage", headers=bearer("k-root")).json()
    assert usage["promptTokens"] == 90
    assert usage["completionTokens"] == 30
    assert usage["modelCalls"] == 3
    assert [(row["user"], row["totalTokens"]) for row in usage["keys"]] == [("amy", 120)]
    assert usage["limits"]["shared"] is True
    assert usage["limits"]["tokenBudget"]["remaining"] == 0


@pytest.fixture
def quotas_log() -> Iterator[list[logging.LogRecord]]:
    """The records of ``aptix.quotas``, from start-up on (the outage is logged there)."""
    with records_of("aptix.quotas") as records:
        yield records


@pytest.fixture
async def gone(
    tmp_path: Path, request: pytest.FixtureRequest, quotas_log: list[logging.LogRecord]
) -> AsyncIterator[httpx.AsyncClient]:
    """An app whose Redis is a port nobody listens on."""
    settings = AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        semantic_matching=False,
        api_keys=KEYS,
        rate_limit="5/minute",
        token_budget="1000/day",
        redis_url=f"redis://127.0.0.1:{free_port()}/0",
        limits_when_redis_down=request.param,
    )
    async with open_runtime(settings) as runtime:
        app = create_app(runtime=runtime)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://test", headers=bearer("k-root")
        ) as client:
            yield client


def outage_lines(records: list[logging.LogRecord]) -> list[Any]:
    return [r for r in records if "Quotas_Redis__Unavailable" in r.getMessage()]


@pytest.mark.parametrize("gone", ["open"], indirect=True)
async def test_a_redis_gone_fails_open_with_one_log_line(
    gone: httpx.AsyncClient, quotas_log: list[logging.LogRecord]
) -> None:
    for _ in range(8):  # more than the rate: nothing is counted, nothing refused
        assert (await gone.get("/v1/modes")).status_code == 200
    usage = await gone.get("/v1/usage")
    assert usage.status_code == 503
    assert usage.json()["error"]["code"] == "limits_unavailable"
    assert len(outage_lines(quotas_log)) == 1  # at start-up, whose ping failed; not again


@pytest.mark.parametrize("gone", ["closed"], indirect=True)
async def test_a_redis_gone_fails_closed_with_503_and_one_log_line(
    gone: httpx.AsyncClient, quotas_log: list[logging.LogRecord]
) -> None:
    chat = {"model": "aptix-general", "messages": [{"role": "user", "content": "hi"}]}
    answers = [await gone.get("/v1/modes") for _ in range(3)]
    answers.append(await gone.post("/v1/chat/completions", json=chat))
    for answer in answers:
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"]["code"] == "limits_unavailable"
        assert answer.headers["Retry-After"] == "5"
        # No limit could be checked: a quota of 0 in the IETF fields would be untrue.
        assert "RateLimit" not in answer.headers
        assert "RateLimit-Policy" not in answer.headers
    assert len(outage_lines(quotas_log)) == 1
