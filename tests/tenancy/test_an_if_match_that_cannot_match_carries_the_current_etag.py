"""A weak, malformed or listed ``If-Match`` fails (412) with the current revision's ``ETag``.

As a stale tag's 412 does, so a client reads the tag to send from the refusal itself; a
workflow the caller's org has no revision of (missing, another org's, deployment-wide) gets
the 412 without one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.tenancy.test_keys_and_roles import AUTHORING

Http = Callable[[str], httpx.AsyncClient]
UNMATCHABLE = ['W/"2"', "2", '"2", "2"', '"2x"']


async def _call(
    client: httpx.AsyncClient, if_match: str | None = None, **arguments: Any
) -> httpx.Response:
    headers = {"If-Match": if_match} if if_match is not None else {}
    return await client.post(AUTHORING, json={"arguments": arguments}, headers=headers)


async def _at_revision_two(client: httpx.AsyncClient, workflow_id: str) -> None:
    drafted = await _call(
        client, operation="draft_workflow", workflowId=workflow_id, title="T", description="D."
    )
    assert drafted.headers["ETag"] == '"1"', drafted.text
    update = {"operation": "update_workflow", "fields": {"title": "T2"}}
    updated = await _call(client, '"1"', workflowId=workflow_id, **update)
    assert updated.headers["ETag"] == '"2"', updated.text


@pytest.mark.parametrize("if_match", UNMATCHABLE)
async def test_an_unmatchable_if_match_fails_with_the_current_revisions_etag(
    http: Http, if_match: str
) -> None:
    """Regression: ``If-Match: W/"2"`` got a 412 without an ETag or the current revision."""
    author = http("k-author")
    await _at_revision_two(author, "unmatched")
    update = {"operation": "update_workflow", "fields": {"title": "changed"}}
    for arguments in ({"workflowId": "unmatched"}, {"workflow_id": "unmatched"}):
        answer = await _call(author, if_match, **update, **arguments)
        assert answer.status_code == 412, answer.text
        assert answer.headers["ETag"] == '"2"'
        error = answer.json()["error"]
        assert error["code"] == "precondition_failed"
        assert "If-Match cannot match" in error["message"]
        assert "the current revision is 2" in error["message"]
    read = await _call(author, operation="get_workflow", workflowId="unmatched")
    assert read.json()["result"]["workflow"]["title"] == "T2"  # nothing changed


@pytest.mark.parametrize(
    "arguments",
    [
        {"operation": "update_workflow", "workflowId": "never_drafted", "fields": {"x": 1}},
        {"operation": "update_workflow", "workflowId": "guided_calculation", "fields": {"x": 1}},
        {"operation": "list_authoring_workflows"},
        {"operation": "update_workflow", "workflowId": ["not", "an", "id"]},
    ],
)
async def test_an_unmatchable_if_match_without_a_stored_revision_has_no_etag(
    http: Http, arguments: dict[str, Any]
) -> None:
    answer = await _call(http("k-author"), 'W/"1"', **arguments)
    assert answer.status_code == 412, answer.text
    assert "ETag" not in answer.headers
    assert answer.json()["error"]["message"] == (
        'If-Match cannot match: send one strong entity tag from an ETag, like "7" '
        "(quotes included)."
    )


async def test_another_orgs_revision_is_not_told(http: Http) -> None:
    await _at_revision_two(http("k-author"), "acme_only")
    update = {"operation": "update_workflow", "workflowId": "acme_only", "fields": {"x": 1}}
    foreign = await _call(http("k-bauthor"), 'W/"2"', **update)
    missing = await _call(http("k-bauthor"), 'W/"2"', **{**update, "workflowId": "nowhere"})
    assert foreign.status_code == missing.status_code == 412
    assert "ETag" not in foreign.headers
    assert foreign.json() == missing.json()
