"""``If-Match`` is a strong comparison of text (RFC 9110 §8.8.3.2): ``"01"`` is not ``"1"``."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from tests.tenancy.test_keys_and_roles import AUTHORING

Http = Callable[[str], httpx.AsyncClient]


@pytest.mark.parametrize("if_match", ['"01"', '"001"', '"0001"', '"1 "', '" 1"'])
async def test_a_tag_that_only_reads_as_the_revision_does_not_match_it(
    http: Http, if_match: str
) -> None:
    admin = http("k-admin")
    drafted = await admin.post(
        AUTHORING,
        json={
            "arguments": {
                "operation": "draft_workflow",
                "workflowId": "offsite",
                "title": "T",
                "description": "D.",
            }
        },
    )
    assert drafted.headers["ETag"] == '"1"'
    change = {"operation": "update_workflow", "workflowId": "offsite", "fields": {"notes": ["n"]}}
    answer = await admin.post(AUTHORING, json={"arguments": change}, headers={"If-Match": if_match})
    assert answer.status_code == 412, answer.text
    assert answer.json()["error"]["code"] == "precondition_failed"
    read = await admin.post(
        AUTHORING, json={"arguments": {"operation": "get_workflow", "workflowId": "offsite"}}
    )
    assert read.headers["ETag"] == '"1"'  # nothing was written
    assert read.json()["result"]["workflow"]["notes"] == []
    # The tag as the ETag wrote it, surrounding spaces allowed, does match.
    same = await admin.post(AUTHORING, json={"arguments": change}, headers={"If-Match": ' "1" '})
    assert same.status_code == 200, same.text
    assert same.headers["ETag"] == '"2"'
