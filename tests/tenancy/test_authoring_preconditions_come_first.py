"""With an expected revision, a change to a workflow gone since is stale: 412 with its ETag.

The expected revision is checked before anything else, so the loser of a race with a discard
or a removal is told the revision the workflow is at, the same way whatever the timing.
"""

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


async def _discarded(admin: httpx.AsyncClient) -> None:
    """``d1`` drafted (revision 1), then its only draft discarded (revision 2)."""
    drafted = await _call(
        admin, operation="draft_workflow", workflowId="d1", title="D", description="d."
    )
    assert drafted.headers["ETag"] == '"1"'
    discarded = await _call(admin, '"1"', operation="discard_draft", workflowId="d1")
    assert discarded.status_code == 200, discarded.text
    assert discarded.headers["ETag"] == '"2"'


@pytest.mark.parametrize(
    "arguments",
    [
        {"operation": "update_workflow", "fields": {"notes": ["x"]}},
        {"operation": "publish_workflow"},
        {"operation": "discard_draft"},
        {"operation": "remove_workflow"},
        {"operation": "update_workflow", "fields": {"status": "disabled"}},
    ],
)
async def test_a_change_with_if_match_to_a_discarded_workflow_fails_its_precondition(
    http: Http, arguments: dict[str, Any]
) -> None:
    admin = http("k-admin")
    await _discarded(admin)
    answer = await _call(admin, '"1"', workflowId="d1", **arguments)
    assert answer.status_code == 412, answer.text
    assert answer.headers["ETag"] == '"2"'
    error = answer.json()["error"]
    assert error["code"] == "precondition_failed"
    assert "is now at revision 2, but this change was based on revision 1" in error["message"]
    history = (await _call(admin, operation="workflow_history", workflowId="d1")).json()
    assert [row["action"] for row in history["result"]["history"]] == ["draft", "discard"]


async def test_an_expected_revision_argument_to_a_discarded_workflow_is_a_conflict(
    http: Http,
) -> None:
    admin = http("k-admin")
    await _discarded(admin)
    answer = await _call(
        admin, operation="update_workflow", workflowId="d1", fields=FIELDS, expectedRevision=1
    )
    assert answer.status_code == 409, answer.text  # without If-Match, as any stale change
    assert answer.headers["ETag"] == '"2"'
    assert answer.json()["error"]["code"] == "conflict"


async def test_a_change_to_a_removed_workflow_on_an_old_revision_fails_its_precondition(
    http: Http,
) -> None:
    admin = http("k-admin")
    await _call(admin, operation="draft_workflow", workflowId="gone", title="G", description="g.")
    await _call(admin, operation="update_workflow", workflowId="gone", fields=FIELDS)
    await _call(admin, operation="publish_workflow", workflowId="gone")
    await _call(
        admin, operation="update_workflow", workflowId="gone", fields={"status": "disabled"}
    )
    removed = await _call(admin, '"4"', operation="remove_workflow", workflowId="gone")
    assert removed.headers["ETag"] == '"5"', removed.text
    for arguments in ({"operation": "remove_workflow"}, {"operation": "discard_draft"}):
        answer = await _call(admin, '"4"', workflowId="gone", **arguments)
        assert answer.status_code == 412, answer.text
        assert answer.headers["ETag"] == '"5"'


async def test_without_an_expected_revision_a_discarded_workflow_is_still_unknown(
    http: Http,
) -> None:
    admin = http("k-admin")
    await _discarded(admin)
    answer = await _call(admin, operation="update_workflow", workflowId="d1", fields=FIELDS)
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["errors"][0]["message"] == "Unknown workflow 'd1'."
