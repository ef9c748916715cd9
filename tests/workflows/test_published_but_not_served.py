"""A published workflow that no longer validates: authoring says so, and sessions are released.

``snapshots/unserved_by_8f95ec8.db`` was written by Aptix 8f95ec8 over HTTP (key ``ka``, org
``acme``, user ``alice``): ``r1_big`` published with 60 intent patterns (the limit is now 50)
and started in session ``6d28df5b…``. Today's Aptix leaves it out of the registry.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aptix.api import create_app
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import ScriptedModel
from aptix.testing.models import reply
from tests.tenancy.conftest import bearer
from tests.tenancy.test_keys_and_roles import AUTHORING

SNAPSHOT = Path(__file__).parent / "snapshots" / "unserved_by_8f95ec8.db"
SESSION = "6d28df5bfddc49648b193d05799ce369"


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture
async def api(tmp_path: Path, model: ScriptedModel) -> AsyncIterator[httpx.AsyncClient]:
    copy = tmp_path / "old.db"
    shutil.copyfile(SNAPSHOT, copy)
    settings = AptixSettings(
        data_dir=tmp_path,
        database_url=f"sqlite+aiosqlite:///{copy}",
        load_plugins=False,
        api_keys="ka=acme:alice",
        semantic_matching=False,
    )
    async with open_runtime(settings) as runtime:
        app = create_app(runtime=runtime, model=model)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://test", headers=bearer("ka")
        ) as client:
            yield client


async def _author(client: httpx.AsyncClient, **arguments: Any) -> dict[str, Any]:
    answer = await client.post(AUTHORING, json={"arguments": arguments})
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    return result


async def test_authoring_reports_a_published_revision_that_is_not_served(
    api: httpx.AsyncClient,
) -> None:
    listed = await _author(api, operation="list_authoring_workflows")
    (row,) = [w for w in listed["workflows"] if w["workflowId"] == "r1_big"]
    assert row["status"] == "published"
    assert row["served"] is False
    assert "userIntentPatterns" in row["notServedReason"]
    assert "50" in row["notServedReason"]

    read = await _author(api, operation="get_workflow", workflowId="r1_big")
    (message,) = read["messages"]
    assert message.startswith("Version 0.1.0 is published but not served: it no longer validates")
    assert "userIntentPatterns" in message


async def test_a_session_in_a_workflow_no_longer_served_is_released_at_its_next_turn(
    api: httpx.AsyncClient, model: ScriptedModel
) -> None:
    before = (await api.get(f"/v1/sessions/{SESSION}")).json()
    assert before["activeWorkflowId"] == "r1_big"
    model.add(reply("Done."))
    turn = await api.post("/v1/agent/execute", json={"sessionId": SESSION, "instruction": "hi"})
    assert turn.status_code == 200, turn.text

    system = model.requests[0].messages[0]
    assert system["role"] == "system"
    assert "workflow 'r1_big' was active in this session but is no longer served" in str(
        system["content"]
    )
    # The mode's tools, not a guard of a workflow whose rules are unknown.
    assert "agent_calculator" in model.offered_tools(0)
    after = (await api.get(f"/v1/sessions/{SESSION}")).json()
    assert after["activeWorkflowId"] is None

    # The note is for the turn that released it only.
    model.add(reply("Again."))
    again = await api.post("/v1/agent/execute", json={"sessionId": SESSION, "instruction": "more"})
    assert again.status_code == 200, again.text
    assert "no longer served" not in str(model.requests[1].messages[0]["content"])
