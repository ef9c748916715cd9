"""The workflow match arbiter's model calls spend the caller's org's token budget."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from mcp.client.client import Client as McpClient

from aptix.api import create_app
from aptix.api.auth import LOCAL_CALLER
from aptix.llm.types import LlmClient, LlmResponse, Usage
from aptix.mcp import build_mcp_server
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import ScriptedModel, call, reply
from tests.tenancy.conftest import bearer

KEYS = "k-ann=acme:ann,k-root=acme:root:admin,k-bob=globex:bob"
MESSAGE = "help me choose a working mode please"


def choose_none(tokens: int) -> LlmResponse:
    return reply(None, call("choose_workflow", {"workflowId": "none"}), usage=Usage(tokens, 0))


@pytest.fixture
def arbiter_model() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture
async def runtime(
    tmp_path: Path, arbiter_model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    def scripted(self: Runtime) -> LlmClient:
        return arbiter_model

    # The arbiter is built on the configured model; here the scripted one stands for it.
    monkeypatch.setattr(Runtime, "default_model", scripted)
    settings = AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        semantic_matching=False,
        api_keys=KEYS,
        llm_model="scripted",
        match_arbiter="always",
        token_budget="100/day",
    )
    async with open_runtime(settings) as runtime:
        yield runtime


async def test_match_spends_the_org_budget_and_stops_asking_once_it_is_spent(
    runtime: Runtime, arbiter_model: ScriptedModel
) -> None:
    arbiter_model.add(choose_none(60), choose_none(50))
    transport = httpx.ASGITransport(app=create_app(runtime=runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:

        async def match(key: str, message: str) -> httpx.Response:
            return await client.post(
                "/v1/workflows/match", json={"userMessage": message}, headers=bearer(key)
            )

        assert (await match("k-ann", f"{MESSAGE} 1")).status_code == 200
        assert (await match("k-ann", f"{MESSAGE} 2")).status_code == 200  # 110 of 100 spent
        # Spent: the arbiter is not called again, and the match still answers from the ranker.
        third = await match("k-ann", f"{MESSAGE} 3")
        assert third.status_code == 200, third.text
        assert third.json()["matches"]
        assert len(arbiter_model.requests) == 2
        arbiter_model.assert_complete()
        # The tokens are the key's, shown on the usage page; another org's budget is its own.
        usage = (await client.get("/v1/usage", headers=bearer("k-root"))).json()
        arbiter_model.add(choose_none(5))
        assert (await match("k-bob", f"{MESSAGE} 4")).status_code == 200
    assert (usage["promptTokens"], usage["modelCalls"]) == (110, 2)
    assert [(row["user"], row["totalTokens"]) for row in usage["keys"]] == [("ann", 110)]
    assert usage["limits"]["tokenBudget"]["remaining"] == 0
    arbiter_model.assert_complete()


async def test_match_workflow_over_mcp_spends_the_callers_budget(
    runtime: Runtime, arbiter_model: ScriptedModel
) -> None:
    arbiter_model.add(choose_none(120))
    arguments = {"operation": "match_workflow", "userMessage": MESSAGE}
    async with McpClient(build_mcp_server(runtime)) as client:
        first = await client.call_tool("agent_workflow_registry", arguments)
        # Another message: the arbiter's cache would answer the same one without a call.
        second = await client.call_tool(
            "agent_workflow_registry", {**arguments, "userMessage": f"{MESSAGE} again"}
        )
    assert not first.is_error
    assert not second.is_error
    assert len(arbiter_model.requests) == 1  # the budget was spent by the first
    state = await runtime.quotas.budget_state(LOCAL_CALLER.org)
    assert state is not None
    assert state["remaining"] == 0
