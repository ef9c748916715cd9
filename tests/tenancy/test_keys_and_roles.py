"""API keys with roles, and one bearer mechanism for the API and /mcp (issue 14, 15 #9)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from aptix.api import create_app
from aptix.runtime import Runtime
from aptix.settings import AptixSettings
from tests.tenancy.conftest import KEYS, bearer

AUTHORING = "/v1/tools/agent_workflow_authoring/invoke"
FIELDS = {
    "userIntentPatterns": ["plan a team offsite"],
    "instructionText": "1. Ask for dates.",
    "permittedTools": ["agent_calculator"],
    "completionCriteria": ["Dates agreed."],
}


async def author(client: httpx.AsyncClient, **arguments: Any) -> dict[str, Any]:
    answer = await client.post(AUTHORING, json={"arguments": arguments})
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    return result


async def draft_complete(client: httpx.AsyncClient, workflow_id: str = "offsite") -> None:
    drafted = await author(
        client,
        operation="draft_workflow",
        workflowId=workflow_id,
        title="Plan an offsite",
        description="Plans an offsite.",
    )
    assert drafted["ok"], drafted
    updated = await author(
        client, operation="update_workflow", workflowId=workflow_id, fields=FIELDS
    )
    assert updated["ok"], updated


async def test_a_user_key_cannot_draft_or_publish(
    http: Callable[[str], httpx.AsyncClient],
) -> None:
    user = http("k-ann")
    refused = await author(
        user, operation="draft_workflow", workflowId="x", title="X", description="X."
    )
    assert refused == {
        "ok": False,
        "errors": [
            {
                "field": "role",
                "message": "draft_workflow needs the 'author' role (or higher); this API "
                "key's role is 'user'. Ask an administrator.",
            }
        ],
    }
    await draft_complete(http("k-author"))
    published = await author(user, operation="publish_workflow", workflowId="offsite")
    assert published["ok"] is False
    assert "needs the 'admin' role" in published["errors"][0]["message"]


async def test_an_author_drafts_and_validates_but_only_an_admin_publishes(
    http: Callable[[str], httpx.AsyncClient],
) -> None:
    writer = http("k-author")
    await draft_complete(writer)
    valid = await author(writer, operation="validate_workflow", workflowId="offsite")
    assert valid["ok"], valid
    refused = await author(writer, operation="publish_workflow", workflowId="offsite")
    assert refused["errors"][0]["field"] == "role"
    published = await author(http("k-admin"), operation="publish_workflow", workflowId="offsite")
    assert published["ok"], published
    retire = {"operation": "update_workflow", "workflowId": "offsite"}
    refused = await author(writer, **retire, fields={"status": "deprecated"})
    assert refused["errors"][0]["message"].startswith("a status change needs the 'admin' role")
    assert (await author(http("k-admin"), **retire, fields={"status": "deprecated"}))["ok"]


async def test_401_carries_a_bearer_challenge_and_the_envelope(
    http: Callable[[str], httpx.AsyncClient],
) -> None:
    for key in ("wrong", ""):
        client = http(key)
        if not key:
            client.headers.pop("Authorization")
        answer = await client.get("/v1/sessions")
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"].startswith("Bearer")
        assert answer.json()["error"]["code"] == "unauthorized"


def _rpc(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


async def test_mcp_uses_the_same_keys_roles_and_challenge(tmp_path: Path) -> None:
    settings = AptixSettings(
        data_dir=tmp_path, load_plugins=False, semantic_matching=False, api_keys=KEYS
    )
    app = create_app(settings)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client,
    ):
        for headers in ({}, bearer("wrong")):
            refused = await client.post(
                "/mcp",
                json=_rpc("agent_calculator", {"expression": "1"}),
                headers={**MCP_HEADERS, **headers},
            )
            assert refused.status_code == 401
            assert refused.headers["www-authenticate"].startswith("Bearer")
            assert refused.json()["error"]["code"] == "unauthorized"
        draft = {
            "operation": "draft_workflow",
            "workflowId": "w",
            "title": "W",
            "description": "W.",
        }
        as_user = await client.post(
            "/mcp",
            json=_rpc("agent_workflow_authoring", draft),
            headers={**MCP_HEADERS, **bearer("k-ann")},
        )
        as_author = await client.post(
            "/mcp",
            json=_rpc("agent_workflow_authoring", draft),
            headers={**MCP_HEADERS, **bearer("k-author")},
        )
    user_result = as_user.json()["result"]["structuredContent"]
    assert user_result["errors"][0]["field"] == "role"
    # A refusal is the authoring envelope, guidance rather than a failed call (TUL-006 §10.3,
    # docs/mcp.md): not an MCP error result, as over HTTP it is "successful": true.
    assert as_user.json()["result"]["isError"] is False
    assert as_author.json()["result"]["structuredContent"]["ok"] is True


async def test_without_keys_the_local_user_is_an_admin(runtime: Runtime) -> None:
    transport = httpx.ASGITransport(app=create_app(runtime=runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as local:
        await draft_complete(local)
        published = await author(local, operation="publish_workflow", workflowId="offsite")
    assert published["ok"], published


@pytest.mark.parametrize("scheme", ["Basic k-ann", "k-ann", "Bearer"])
async def test_other_schemes_are_refused(
    http: Callable[[str], httpx.AsyncClient], scheme: str
) -> None:
    client = http("k-ann")
    client.headers["Authorization"] = scheme
    answer = await client.get("/v1/sessions")
    assert answer.status_code == 401
