"""Authoring over HTTP: ``ETag`` out, ``If-Match`` in, 412 or 409 on a stale change (issue 25)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.tenancy.test_keys_and_roles import AUTHORING, FIELDS

Http = Callable[[str], httpx.AsyncClient]


async def _call(
    client: httpx.AsyncClient, if_match: str | None = None, **arguments: Any
) -> httpx.Response:
    headers = {"If-Match": if_match} if if_match is not None else {}
    return await client.post(AUTHORING, json={"arguments": arguments}, headers=headers)


async def test_authoring_sends_etags_and_honours_if_match(http: Http) -> None:
    admin = http("k-admin")
    drafted = await _call(
        admin, operation="draft_workflow", workflowId="offsite", title="T", description="D."
    )
    assert drafted.status_code == 200, drafted.text
    assert drafted.headers["ETag"] == '"1"'
    assert drafted.json()["result"]["revision"] == 1
    read = await _call(admin, operation="get_workflow", workflowId="offsite")
    assert read.headers["ETag"] == '"1"'

    updated = await _call(
        admin, '"1"', operation="update_workflow", workflowId="offsite", fields=FIELDS
    )
    assert updated.status_code == 200, updated.text
    assert updated.headers["ETag"] == '"2"'

    # Someone else's change went first: the precondition fails, nothing is written.
    stale = await _call(
        admin, '"1"', operation="update_workflow", workflowId="offsite", fields={"notes": ["x"]}
    )
    assert stale.status_code == 412
    assert stale.headers["ETag"] == '"2"'
    error = stale.json()["error"]
    assert error["code"] == "precondition_failed"
    assert "is now at revision 2, but this change was based on revision 1" in error["message"]
    after = (await _call(admin, operation="get_workflow", workflowId="offsite")).json()
    assert after["result"]["workflow"]["notes"] == []

    # The same check through the argument, without If-Match: 409.
    conflict = await _call(
        admin, operation="publish_workflow", workflowId="offsite", expectedRevision=1
    )
    assert conflict.status_code == 409
    assert conflict.json()["error"]["code"] == "conflict"
    published = await _call(admin, '"2"', operation="publish_workflow", workflowId="offsite")
    assert published.status_code == 200, published.text
    assert published.headers["ETag"] == '"3"'


async def test_a_deployment_wide_workflow_has_no_etag(http: Http) -> None:
    read = await _call(http("k-admin"), operation="get_workflow", workflowId="guided_calculation")
    assert read.status_code == 200
    assert read.json()["result"]["ok"] is True
    assert "ETag" not in read.headers


@pytest.mark.parametrize(
    ("tool", "if_match", "arguments", "message"),
    [
        (
            "agent_workflow_authoring",
            '"1"',
            {"operation": "get_workflow", "expectedRevision": 2},
            "If-Match names revision 1, but expectedRevision is 2",
        ),
    ],
)
async def test_a_bad_if_match_is_a_400_in_the_envelope(
    http: Http, tool: str, if_match: str, arguments: Any, message: str
) -> None:
    answer = await http("k-admin").post(
        f"/v1/tools/{tool}/invoke", json={"arguments": arguments}, headers={"If-Match": if_match}
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "bad_request"
    assert message in answer.json()["error"]["message"]


@pytest.mark.parametrize("if_match", ['W/"1"', '"1", "2"', "<script>", "null", "0"])
async def test_an_if_match_that_is_not_one_strong_tag_cannot_match(
    http: Http, if_match: str
) -> None:
    answer = await http("k-admin").post(
        "/v1/tools/agent_workflow_authoring/invoke",
        json={"arguments": {"operation": "get_workflow"}},
        headers={"If-Match": if_match},
    )
    assert answer.status_code == 412, answer.text
    assert answer.json()["error"]["code"] == "precondition_failed"
    assert "one strong entity tag" in answer.json()["error"]["message"]


async def test_if_match_on_a_tool_without_revisions_fails_the_precondition(http: Http) -> None:
    answer = await http("k-admin").post(
        "/v1/tools/agent_calculator/invoke",
        json={"arguments": {"expression": "1+1"}},
        headers={"If-Match": '"1"'},
    )
    assert answer.status_code == 412, answer.text
    assert answer.json()["error"]["code"] == "precondition_failed"
    assert "has no revisions" in answer.json()["error"]["message"]


@pytest.mark.parametrize("flag", [True, False])
async def test_a_boolean_expected_revision_is_refused_not_read_as_a_number(
    http: Http, flag: bool
) -> None:
    admin = http("k-admin")
    drafted = await _call(
        admin, operation="draft_workflow", workflowId="offsite", title="T", description="D."
    )
    await _call(admin, '"1"', operation="update_workflow", workflowId="offsite", fields=FIELDS)
    refused = await _call(
        admin, operation="publish_workflow", workflowId="offsite", expectedRevision=flag
    )
    result = refused.json()["result"]
    assert result["ok"] is False, result
    assert "'expectedRevision'" in result["errors"][0]["message"]
    assert "not true or false" in result["errors"][0]["message"]
    assert drafted.status_code == 200, drafted.text
    after = await _call(admin, operation="get_workflow", workflowId="offsite")
    assert after.headers["ETag"] == '"2"'  # nothing was published
