"""Several ``If-Match`` lines are one list (RFC 9110 §5.3): a stale tag on any line fails."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from aptix.api.conditional import if_match_field

AUTHORING = "/v1/tools/agent_workflow_authoring/invoke"


async def _call(client: httpx.AsyncClient, if_match: list[str], **arguments: Any) -> httpx.Response:
    headers = [("If-Match", line) for line in if_match]
    return await client.post(AUTHORING, json={"arguments": arguments}, headers=headers)


async def _title(client: httpx.AsyncClient, workflow: str) -> str:
    read = await _call(client, [], operation="get_workflow", workflowId=workflow)
    return str(read.json()["result"]["workflow"]["title"])


@pytest.mark.parametrize("lines", [['"1"', '"9"'], ['"9"', '"1"'], ['"1"', "*"], ['"1"', '"1"']])
async def test_a_second_if_match_line_is_part_of_the_precondition(
    no_model_client: httpx.AsyncClient, lines: list[str]
) -> None:
    """Regression: ``If-Match: "1"`` then ``If-Match: "9"`` changed the workflow (200)."""
    client = no_model_client
    drafted = await _call(
        client, [], operation="draft_workflow", workflowId="lines", title="T", description="D."
    )
    assert drafted.headers["ETag"] == '"1"'
    update = {"operation": "update_workflow", "workflowId": "lines", "fields": {"title": "new"}}
    on_one_line = await _call(client, [", ".join(lines)], **update)
    on_two_lines = await _call(client, lines, **update)
    for answer in (on_one_line, on_two_lines):
        # A list never matches one revision: the same refusal however the list was sent.
        assert answer.status_code == 412, answer.text
        assert answer.json()["error"]["code"] == "precondition_failed"
    assert await _title(client, "lines") == "T"  # nothing changed


async def test_one_line_and_empty_lines_still_match(no_model_client: httpx.AsyncClient) -> None:
    client = no_model_client
    await _call(
        client, [], operation="draft_workflow", workflowId="one", title="T", description="D."
    )
    update = {"operation": "update_workflow", "workflowId": "one", "fields": {"title": "new"}}
    changed = await _call(client, ["", '"1"'], **update)  # an empty line adds nothing
    assert changed.status_code == 200, changed.text
    assert changed.headers["ETag"] == '"2"'
    assert await _title(client, "one") == "new"


def test_the_lines_are_joined_as_one_list() -> None:
    assert if_match_field([]) is None
    assert if_match_field(['"1"']) == '"1"'
    assert if_match_field([' "1" ', "", '"9"']) == '"1", "9"'
    assert if_match_field([" "]) == ""  # present but empty: no precondition
