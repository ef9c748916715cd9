"""Workflows a process older than migration 0008 changed: their heads catch up with the rows.

A pre-0008 process (schema 0006) appends revision rows without moving ``workflow_heads``.
The rows here are written as it wrote them (raw SQL, its manifest JSON), while today's
runtime serves the same database; authoring must then accept a change based on the
revision it reports, over HTTP, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from aptix.api import create_app
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import ScriptedModel
from tests.tenancy.conftest import bearer
from tests.tenancy.test_keys_and_roles import AUTHORING, FIELDS

KEYS = "k-admin=acme:root:admin"


def _old_manifest(workflow_id: str, title: str) -> str:
    """A draft manifest as the 0006 process stored it."""
    return json.dumps(
        {
            "workflowId": workflow_id,
            "title": title,
            "description": "Written by an older Aptix.",
            "userIntentPatterns": [],
            "requiredInputs": [],
            "instructionText": "",
            "permittedTools": [],
            "completionCriteria": [],
            "followUpOptions": [],
            "preconditions": [],
            "notes": [],
            "version": "0.1.0",
            "status": "draft",
            "visibility": "public",
            "autoStart": False,
            "requiresApproval": False,
            "destructiveActions": [],
            "allowedTransitions": [],
        }
    )


async def _old_process_appends(runtime: Runtime, workflow_id: str, action: str, title: str) -> None:
    """What a 0006 process did: the next row after MAX(revision), the counter, no head."""
    async with runtime.database.transaction() as session:
        last = await session.scalar(
            text(
                "SELECT MAX(revision) FROM workflow_revisions"
                " WHERE org = 'acme' AND workflow_id = :w"
            ),
            {"w": workflow_id},
        )
        await session.execute(
            text(
                "INSERT INTO workflow_revisions (org, workflow_id, revision, action, version,"
                " status, manifest_json, created_at, created_by) VALUES ('acme', :w, :r, :a,"
                " '0.1.0', 'draft', :m, CURRENT_TIMESTAMP, 'old-alice')"
            ),
            {
                "w": workflow_id,
                "r": (last or 0) + 1,
                "a": action,
                "m": _old_manifest(workflow_id, title),
            },
        )
        await session.execute(text("UPDATE workflow_changes SET counter = counter + 1"))


@pytest.fixture
async def served(
    database_url: str, tmp_path: Path
) -> AsyncIterator[tuple[Runtime, httpx.AsyncClient]]:
    settings = AptixSettings(
        data_dir=tmp_path,
        database_url=database_url,
        load_plugins=False,
        api_keys=KEYS,
        semantic_matching=False,
    )
    async with open_runtime(settings) as runtime:
        app = create_app(runtime=runtime, model=ScriptedModel())
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://test",
            headers=bearer("k-admin"),
        ) as client:
            yield runtime, client


async def _call(
    client: httpx.AsyncClient, if_match: str | None = None, **arguments: Any
) -> httpx.Response:
    headers = {"If-Match": if_match} if if_match is not None else {}
    return await client.post(AUTHORING, json={"arguments": arguments}, headers=headers)


async def test_a_change_based_on_the_reported_revision_is_accepted_after_an_old_edit(
    served: tuple[Runtime, httpx.AsyncClient], tmp_path: Path
) -> None:
    runtime, client = served
    wid = f"rolled_{tmp_path.name[-8:].lower().replace('-', '_')}"
    drafted = await _call(
        client, operation="draft_workflow", workflowId=wid, title="T", description="D."
    )
    assert drafted.status_code == 200, drafted.text
    await _old_process_appends(runtime, wid, "update", "Edited by the old process")

    read = await _call(client, operation="get_workflow", workflowId=wid)
    assert read.headers["ETag"] == '"2"'
    assert read.json()["result"]["workflow"]["title"] == "Edited by the old process"

    updated = await _call(client, '"2"', operation="update_workflow", workflowId=wid, fields=FIELDS)
    assert updated.status_code == 200, updated.text
    assert updated.headers["ETag"] == '"3"'
    published = await _call(client, operation="publish_workflow", workflowId=wid)
    assert published.status_code == 200, published.text
    assert published.headers["ETag"] == '"4"'
    # The head moved on with the rows: a stale tag is still refused, naming the real revision.
    stale = await _call(
        client, '"2"', operation="update_workflow", workflowId=wid, fields={"notes": ["x"]}
    )
    assert stale.status_code == 412
    assert (
        "now at revision 4, but this change was based on revision 2"
        in stale.json()["error"]["message"]
    )


async def test_a_workflow_an_old_process_drafted_is_listed_and_can_be_changed(
    served: tuple[Runtime, httpx.AsyncClient], tmp_path: Path
) -> None:
    runtime, client = served
    wid = f"old_draft_{tmp_path.name[-8:].lower().replace('-', '_')}"
    await _old_process_appends(runtime, wid, "draft", "Drafted by the old process")

    listed = await _call(client, operation="list_authoring_workflows")
    rows = {row["workflowId"]: row for row in listed.json()["result"]["workflows"]}
    assert rows[wid]["revision"] == 1
    read = await _call(client, operation="get_workflow", workflowId=wid)
    assert read.headers["ETag"] == '"1"'

    updated = await _call(client, operation="update_workflow", workflowId=wid, fields=FIELDS)
    assert updated.status_code == 200, updated.text
    assert updated.headers["ETag"] == '"2"'
