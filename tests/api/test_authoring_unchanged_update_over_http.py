"""Over HTTP, an update that changes nothing answers 200 at the same ``ETag`` (review r3-F3).

Re-sending a title as it is wrote revision 4, said "Updated title" and left a pending draft,
which then refused the admin's disable.
"""

from __future__ import annotations

from typing import Any

import httpx

FIELDS = {
    "userIntentPatterns": ["order office plants"],
    "instructionText": "Order the plants.",
    "permittedTools": ["agent_calculator"],
    "completionCriteria": ["The plants are ordered."],
}


async def _author(
    api: httpx.AsyncClient, headers: dict[str, str] | None = None, **arguments: Any
) -> httpx.Response:
    answer = await api.post(
        "/v1/tools/agent_workflow_authoring/invoke",
        json={"arguments": arguments},
        headers=headers or {},
    )
    assert answer.status_code == 200, answer.text
    return answer


async def test_resending_the_stored_title_keeps_the_revision_and_allows_disabling(
    no_model_client: httpx.AsyncClient,
) -> None:
    api = no_model_client
    await _author(api, operation="draft_workflow", workflowId="plants", title="P", description="d")
    await _author(api, operation="update_workflow", workflowId="plants", fields=FIELDS)
    await _author(api, operation="publish_workflow", workflowId="plants")
    same = await _author(
        api,
        {"If-Match": '"3"'},
        operation="update_workflow",
        workflowId="plants",
        fields={"title": "P"},
    )
    result = same.json()["result"]
    assert result["ok"] is True
    assert same.headers["ETag"] == '"3"'
    assert result["messages"][0].startswith("Nothing changed: title of 'plants' already holds")
    listed = (await _author(api, operation="list_authoring_workflows")).json()["result"]
    row = next(r for r in listed["workflows"] if r["workflowId"] == "plants")
    assert (row["status"], row["revision"]) == ("published", 3)
    disabled = await _author(
        api, operation="update_workflow", workflowId="plants", fields={"status": "disabled"}
    )
    assert disabled.json()["result"]["ok"] is True
