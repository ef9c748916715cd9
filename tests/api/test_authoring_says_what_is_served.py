"""Workflow authoring over HTTP says what is served, and which revision a validation checked.

A disabled version is not served: the messages about a draft over it said it "stays served".
``validate_workflow`` checks what is stored now; its answer names that revision, failed or not,
so a page showing another revision can tell its problems are not the page's.
"""

from __future__ import annotations

from typing import Any

import httpx

FIELDS = {
    "userIntentPatterns": ["order office lamps"],
    "instructionText": "Order the lamps.",
    "permittedTools": ["agent_calculator"],
    "completionCriteria": ["The lamps are ordered."],
}


async def _author(api: httpx.AsyncClient, **arguments: Any) -> dict[str, Any]:
    answer = await api.post(
        "/v1/tools/agent_workflow_authoring/invoke", json={"arguments": arguments}
    )
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    return result


async def _published(api: httpx.AsyncClient, workflow_id: str) -> None:
    await _author(
        api, operation="draft_workflow", workflowId=workflow_id, title="L", description="d"
    )
    await _author(api, operation="update_workflow", workflowId=workflow_id, fields=FIELDS)
    assert (await _author(api, operation="publish_workflow", workflowId=workflow_id))["ok"]


async def test_a_draft_over_a_disabled_version_is_never_said_to_be_served(
    no_model_client: httpx.AsyncClient,
) -> None:
    api = no_model_client
    await _published(api, "lamps")
    disable = {"status": "disabled"}
    assert (await _author(api, operation="update_workflow", workflowId="lamps", fields=disable))[
        "ok"
    ]
    edited = await _author(
        api, operation="update_workflow", workflowId="lamps", fields={"notes": ["later"]}
    )
    assert edited["messages"][1] == (
        "A new draft version 0.1.1 was created; version 0.1.0 stays disabled (not served) until "
        "the draft is published. Raise the minor or major version for additions or behaviour "
        "changes."
    )
    got = await _author(api, operation="get_workflow", workflowId="lamps")
    assert got["messages"] == [
        "This is a draft; version 0.1.0 stays disabled (not served) until the draft is published."
    ]
    listed = await _author(api, operation="list_authoring_workflows")
    [row] = [r for r in listed["workflows"] if r["workflowId"] == "lamps"]
    assert (row["publishedVersion"], row["publishedStatus"]) == ("0.1.0", "disabled")
    discarded = await _author(api, operation="discard_draft", workflowId="lamps")
    assert discarded["messages"] == [
        "Draft 0.1.1 of 'lamps' was discarded; version 0.1.0 stays disabled (not served)."
    ]
    assert "lamps" not in [
        w["workflowId"] for w in (await api.get("/v1/workflows")).json()["workflows"]
    ]


async def test_a_draft_over_a_served_version_says_it_stays_served(
    no_model_client: httpx.AsyncClient,
) -> None:
    api = no_model_client
    await _published(api, "desks")
    edited = await _author(
        api, operation="update_workflow", workflowId="desks", fields={"notes": ["later"]}
    )
    assert "version 0.1.0 stays served until the draft is published" in edited["messages"][1]
    listed = await _author(api, operation="list_authoring_workflows")
    [row] = [r for r in listed["workflows"] if r["workflowId"] == "desks"]
    assert row["publishedStatus"] == "published"
    discarded = await _author(api, operation="discard_draft", workflowId="desks")
    assert discarded["messages"] == [
        "Draft 0.1.1 of 'desks' was discarded; version 0.1.0 stays served."
    ]


async def test_a_failed_validation_names_the_revision_it_checked(
    no_model_client: httpx.AsyncClient,
) -> None:
    api = no_model_client
    await _author(api, operation="draft_workflow", workflowId="pens", title="P", description="d")
    fields = {**FIELDS, "permittedTools": ["no_such_tool_xyz"]}
    changed = await _author(api, operation="update_workflow", workflowId="pens", fields=fields)
    answer = await api.post(
        "/v1/tools/agent_workflow_authoring/invoke",
        json={"arguments": {"operation": "validate_workflow", "workflowId": "pens"}},
    )
    result = answer.json()["result"]
    assert result["ok"] is False
    assert result["revision"] == changed["revision"] == 2
    assert answer.headers["ETag"] == '"2"'
