"""Rate limits, concurrent turns and token budgets, in one process (issue 25, DESIGN.md §15)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.client import Client as McpClient

from aptix.api import create_app
from aptix.llm.types import LlmRequest, LlmResponse, Usage
from aptix.mcp import build_mcp_server
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings, load_settings
from aptix.testing import ScriptedModel, call, reply
from tests.tenancy.conftest import key_clients

KEYS = "k-ann=acme:ann,k-amy=acme:amy,k-root=acme:root:admin,k-bob=globex:bob"

Client = Callable[[str], httpx.AsyncClient]


@pytest.fixture
def limits() -> dict[str, Any]:
    return {}


@pytest.fixture
async def http(tmp_path: Path, limits: dict[str, Any], model: Any) -> AsyncIterator[Client]:
    settings = AptixSettings(
        data_dir=tmp_path, load_plugins=False, semantic_matching=False, api_keys=KEYS, **limits
    )
    async with (
        open_runtime(settings) as runtime,
        key_clients(create_app(runtime=runtime, model=model)) as make,
    ):
        yield make


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel()


def policy(answer: httpx.Response) -> dict[str, str]:
    """The 429's limit headers, parsed enough to compare."""
    return {name: answer.headers[name] for name in ("Retry-After", "RateLimit", "RateLimit-Policy")}


@pytest.mark.parametrize("limits", [{"rate_limit": "3/minute"}])
async def test_a_key_past_its_rate_gets_429_with_the_ietf_headers(http: Client) -> None:
    ann, amy = http("k-ann"), http("k-amy")
    for _ in range(3):
        assert (await ann.get("/v1/modes")).status_code == 200
    refused = await ann.get("/v1/modes")
    assert refused.status_code == 429, refused.text
    assert refused.json()["error"]["code"] == "rate_limited"
    assert "may make 3/minute requests" in refused.json()["error"]["message"]
    headers = policy(refused)
    assert 1 <= int(headers["Retry-After"]) <= 60
    assert re.fullmatch(r'"requests";r=0;t=\d+', headers["RateLimit"])
    assert headers["RateLimit-Policy"] == '"requests";q=3;w=60'
    # Per key: another key of the same org still has its own three.
    assert (await amy.get("/v1/modes")).status_code == 200


async def test_a_rate_limited_key_gets_a_tool_error_over_mcp(tmp_path: Path) -> None:
    settings = AptixSettings(
        data_dir=tmp_path, load_plugins=False, semantic_matching=False, rate_limit="1/minute"
    )
    async with open_runtime(settings) as runtime, McpClient(build_mcp_server(runtime)) as client:
        first = await client.call_tool("agent_calculator", {"expression": "1+1"})
        second = await client.call_tool("agent_calculator", {"expression": "1+1"})
    assert not first.is_error
    assert second.is_error
    assert "Rate limit reached" in second.content[0].text  # type: ignore[union-attr]


def spend(tokens: int, *calls: Any) -> LlmResponse:
    return reply(None if calls else "done", *calls, usage=Usage(tokens, 0))


@pytest.mark.parametrize("limits", [{"token_budget": "100/day"}])
async def test_a_token_budget_ends_a_turn_mid_way_recorded_then_refuses_new_turns(
    http: Client, model: ScriptedModel
) -> None:
    ann, root, bob = http("k-ann"), http("k-root"), http("k-bob")
    model.add(spend(40))
    first = await ann.post("/v1/agent/execute", json={"instruction": "hello"})
    assert first.json()["kind"] == "ok", first.text
    # The second turn's first call goes over the budget; the model is not called again.
    model.add(spend(70, call("agent_calculator", {"expression": "1+1"})))
    second = await ann.post("/v1/agent/execute", json={"instruction": "add"})
    body = second.json()
    assert second.status_code == 200, second.text
    assert body["kind"] == "error"
    assert body["error"].startswith("Token budget reached: this organization may use 100/day")
    assert body["toolCalls"][0]["wasExecuted"] is True  # what ran before stays recorded
    session = body["sessionId"]
    stored = (await ann.get(f"/v1/sessions/{session}")).json()["turns"][-1]
    assert stored["status"] == "error"  # recorded as ended, its executed call with it
    assert stored["toolCalls"][0]["wasExecuted"] is True
    model.assert_complete()
    # Now the org's turns are refused before they start, the other org's are not.
    refused = await ann.post("/v1/agent/execute", json={"instruction": "more"})
    assert refused.status_code == 429, refused.text
    assert refused.json()["error"]["code"] == "token_budget_exhausted"
    headers = policy(refused)
    assert headers["RateLimit-Policy"] == '"tokens";q=100;w=86400'
    assert headers["RateLimit"].startswith('"tokens";r=0;t=')
    model.add(spend(5))
    assert (await bob.post("/v1/agent/execute", json={"instruction": "hi"})).json()["kind"] == "ok"

    usage = await root.get("/v1/usage")
    assert usage.status_code == 200, usage.text
    shown = usage.json()
    assert shown["org"] == "acme"
    assert shown["promptTokens"] == 110
    assert shown["modelCalls"] == 2
    assert [(row["user"], row["totalTokens"]) for row in shown["keys"]] == [("ann", 110)]
    assert "k-ann" not in usage.text  # keys are named by a digest, never shown
    assert shown["limits"]["tokenBudget"]["limit"] == "100/day"
    assert shown["limits"]["tokenBudget"]["remaining"] == 0
    forbidden = await ann.get("/v1/usage")
    assert forbidden.status_code == 403


class HeldModel:
    """Answers once the test lets it; counts the calls waiting."""

    def __init__(self) -> None:
        self.go = asyncio.Event()
        self.waiting = 0
        self.arrived = asyncio.Condition()

    async def complete(self, request: LlmRequest, on_text: Any = None) -> LlmResponse:
        async with self.arrived:
            self.waiting += 1
            self.arrived.notify_all()
        await self.go.wait()
        return reply("done")


@pytest.mark.parametrize("limits", [{"max_concurrent_turns": 1}])
@pytest.mark.parametrize("model", [HeldModel()])
async def test_an_org_past_its_concurrent_turns_gets_429_until_one_ends(
    http: Client, model: HeldModel
) -> None:
    ann, amy, bob = http("k-ann"), http("k-amy"), http("k-bob")
    running = asyncio.create_task(ann.post("/v1/agent/execute", json={"instruction": "a"}))
    async with model.arrived:
        await model.arrived.wait_for(lambda: model.waiting == 1)
    refused = await amy.post("/v1/agent/execute", json={"instruction": "b"})
    assert refused.status_code == 429, refused.text
    assert refused.json()["error"]["code"] == "too_many_turns"
    assert refused.headers["RateLimit-Policy"] == '"turns";q=1;qu="concurrent-requests"'
    other = asyncio.create_task(bob.post("/v1/agent/execute", json={"instruction": "c"}))
    async with model.arrived:  # another org is not held back
        await model.arrived.wait_for(lambda: model.waiting == 2)
    model.go.set()
    assert (await running).json()["kind"] == "ok"
    assert (await other).json()["kind"] == "ok"
    assert (await amy.post("/v1/agent/execute", json={"instruction": "d"})).status_code == 200


def test_limits_settings_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    from aptix.errors import ConfigurationError

    for name, value in (
        ("APTIX_RATE_LIMIT", "sixty a minute"),
        ("APTIX_TOKEN_BUDGET", "10/day;5/hour"),
    ):
        monkeypatch.setenv(name, value)
        with pytest.raises(ConfigurationError, match=f"{name}: .*is not one limit"):
            load_settings()
        monkeypatch.delenv(name)


async def test_usage_in_memory_keeps_only_the_days_redis_would_keep() -> None:
    from aptix.quotas.usage import UsageMeter, today

    meter = UsageMeter(None)
    meter._memory[("acme", "2020-01-01")]["k|ann|promptTokens"] = 5  # an old day
    await meter.record("acme", "k", "ann", Usage(3, 2))
    assert ("acme", "2020-01-01") not in meter._memory
    shown = await meter.read("acme", today())
    assert (shown["promptTokens"], shown["completionTokens"], shown["modelCalls"]) == (3, 2, 1)
