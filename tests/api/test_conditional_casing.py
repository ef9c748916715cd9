"""``If-Match`` against ``expectedRevision`` in every casing a tool reads (issue 25)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from aptix.api.conditional import apply_if_match
from aptix.api.errors import ApiError

AUTHORING = "/v1/tools/agent_workflow_authoring/invoke"
SPELLINGS = ("expectedRevision", "ExpectedRevision", "expected_revision")


@pytest.mark.parametrize("key", SPELLINGS)
def test_a_stale_revision_in_any_casing_disagrees_with_if_match(key: str) -> None:
    arguments = json.dumps({"operation": "update_workflow", key: 0})
    with pytest.raises(ApiError) as refused:
        apply_if_match("agent_workflow_authoring", True, arguments, '"1"')
    assert refused.value.status == 400
    assert refused.value.message == f"If-Match names revision 1, but {key} is 0."


@pytest.mark.parametrize("key", SPELLINGS)
def test_an_agreeing_revision_leaves_one_spelling(key: str) -> None:
    arguments = json.dumps({"operation": "update_workflow", key: 1})
    sent = json.loads(apply_if_match("agent_workflow_authoring", True, arguments, '"1"'))
    assert sent == {"operation": "update_workflow", "expectedRevision": 1}


@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_revision_is_refused_not_read_as_a_number(value: bool) -> None:
    arguments = json.dumps({"operation": "update_workflow", "ExpectedRevision": value})
    with pytest.raises(ApiError) as refused:
        apply_if_match("agent_workflow_authoring", True, arguments, '"1"')
    assert refused.value.status == 400
    assert refused.value.message == (
        f"ExpectedRevision must be a revision number, not {json.dumps(value)}."
    )


async def _call(
    client: httpx.AsyncClient, if_match: str | None = None, **arguments: Any
) -> httpx.Response:
    headers = {"If-Match": if_match} if if_match is not None else {}
    return await client.post(AUTHORING, json={"arguments": arguments}, headers=headers)


async def test_a_stale_pascal_case_revision_is_not_overridden_by_if_match(
    no_model_client: httpx.AsyncClient,
) -> None:
    """Regression: ``ExpectedRevision: 0`` beside ``If-Match: "1"`` changed the workflow."""
    client = no_model_client
    drafted = await _call(
        client, operation="draft_workflow", workflowId="race_y", title="T", description="D."
    )
    assert drafted.headers["ETag"] == '"1"'
    for key in ("ExpectedRevision", "expected_revision"):
        stale = await _call(
            client,
            '"1"',
            operation="update_workflow",
            workflowId="race_y",
            fields={"title": "pascal"},
            **{key: 0},
        )
        assert stale.status_code == 400, stale.text
        assert stale.json() == {
            "error": {
                "code": "bad_request",
                "message": f"If-Match names revision 1, but {key} is 0.",
            }
        }
    read = await _call(client, operation="get_workflow", workflowId="race_y")
    assert read.json()["result"]["workflow"]["title"] == "T"
    assert read.headers["ETag"] == '"1"'
