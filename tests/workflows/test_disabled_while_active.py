"""Disabling a workflow stops it where it already runs, not only for new starts (DESIGN §6).

From the moment it is disabled its ``permittedTools`` are no longer granted on any surface
(only the always-offered tools remain, so it can be cancelled), and the session's next turn
releases it and tells the model why, as for a workflow that is no longer served.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aptix.api import create_app
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import ScriptedModel
from aptix.testing.models import reply
from tests.tenancy.conftest import bearer

AUTHORING = "/v1/tools/agent_workflow_authoring/invoke"
RUN = "/v1/tools/agent_workflow_run/invoke"
HELLO = "/v1/tools/agent_hello_world/invoke"
DISABLED_NOTE = (
    "Note: workflow 'risky' was active in this session but has been disabled, so it has ended "
    "and its rules no longer apply."
)


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        api_keys="ka=acme:alice:admin",
        semantic_matching=False,
    )
    async with open_runtime(settings) as runtime:
        yield runtime


@pytest.fixture
async def api(runtime: Runtime, model: ScriptedModel) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(runtime=runtime, model=model)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test", headers=bearer("ka")
    ) as client:
        yield client


async def _invoke(
    client: httpx.AsyncClient, path: str, session_id: str | None = None, **arguments: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"arguments": arguments}
    if session_id:
        body["sessionId"] = session_id
    answer = await client.post(path, json=body)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


async def _session(client: httpx.AsyncClient) -> str:
    # The calculation mode does not offer agent_hello_world: only the workflow grants it.
    created = await client.post("/v1/sessions", json={"mode": "calculation"})
    assert created.status_code in (200, 201), created.text
    session_id: str = created.json()["sessionId"]
    return session_id


async def _active(client: httpx.AsyncClient, session_id: str) -> str | None:
    active: str | None = (await client.get(f"/v1/sessions/{session_id}")).json()["activeWorkflowId"]
    return active


async def _risky_running(client: httpx.AsyncClient) -> str:
    """Publish ``risky`` (permits agent_hello_world), start it in a new session, disable it."""
    fields = {
        "userIntentPatterns": ["run the risky flow"],
        "instructionText": "Greet people.",
        "permittedTools": ["agent_hello_world"],
        "completionCriteria": ["Greeted."],
    }
    for arguments in (
        {"operation": "draft_workflow", "workflowId": "risky", "title": "Risky"},
        {"operation": "update_workflow", "workflowId": "risky", "fields": fields},
        {"operation": "publish_workflow", "workflowId": "risky"},
    ):
        if arguments["operation"] == "draft_workflow":
            arguments["description"] = "Greets."
        assert (await _invoke(client, AUTHORING, **arguments))["result"]["ok"]
    session_id = await _session(client)
    started = await _invoke(client, RUN, session_id, operation="start_workflow", workflowId="risky")
    assert started["successful"], started
    assert (await _invoke(client, HELLO, session_id, name="before"))["successful"]
    disabled = await _invoke(
        client,
        AUTHORING,
        operation="update_workflow",
        workflowId="risky",
        fields={"status": "disabled"},
    )
    assert disabled["result"]["ok"], disabled
    return session_id


async def test_a_disabled_workflow_no_longer_grants_its_tools_where_it_runs(
    api: httpx.AsyncClient,
) -> None:
    session_id = await _risky_running(api)

    refused = await _invoke(api, HELLO, session_id, name="after")
    assert not refused["successful"]
    (error,) = refused["errors"]
    assert error["message"].startswith(
        "Workflow error: the tool 'agent_hello_world' is not permitted: workflow 'risky' is "
        "still active in this session but is disabled or no longer served"
    )
    # It can still be ended by hand before its next turn.
    cancelled = await _invoke(api, RUN, session_id, operation="cancel_workflow", workflowId="risky")
    assert cancelled["successful"], cancelled
    assert await _active(api, session_id) is None


async def test_the_next_turn_releases_a_disabled_workflow_and_tells_the_model(
    api: httpx.AsyncClient, model: ScriptedModel
) -> None:
    session_id = await _risky_running(api)
    model.add(reply("Done."))
    turn = await api.post("/v1/agent/execute", json={"sessionId": session_id, "instruction": "hi"})
    assert turn.status_code == 200, turn.text

    system = str(model.requests[0].messages[0]["content"])
    assert DISABLED_NOTE in system
    assert "Active workflow: none." in system
    assert "agent_hello_world" not in model.offered_tools(0)
    assert "agent_calculator" in model.offered_tools(0)  # the mode's tools again
    assert await _active(api, session_id) is None

    # The note is for the turn that released it only.
    model.add(reply("Again."))
    again = await api.post(
        "/v1/agent/execute", json={"sessionId": session_id, "instruction": "more"}
    )
    assert again.status_code == 200, again.text
    assert "has been disabled" not in str(model.requests[1].messages[0]["content"])


async def test_a_child_branched_with_a_disabled_workflow_is_released_at_its_first_turn(
    api: httpx.AsyncClient, runtime: Runtime, model: ScriptedModel
) -> None:
    parent = await _risky_running(api)
    branched = await runtime.services.sessions.branch_session(
        parent, "general", "new topic", "acme", "alice"
    )
    assert branched.result is not None
    child = branched.result.id
    assert await _active(api, child) == "risky"  # inherited, but grants nothing now
    assert not (await _invoke(api, HELLO, child, name="child"))["successful"]

    model.add(reply("Done."))
    turn = await api.post("/v1/agent/execute", json={"sessionId": child, "instruction": "hi"})
    assert turn.status_code == 200, turn.text
    assert DISABLED_NOTE in str(model.requests[0].messages[0]["content"])
    assert await _active(api, child) is None


async def test_re_enabled_before_the_next_turn_the_workflow_keeps_running(
    api: httpx.AsyncClient, model: ScriptedModel
) -> None:
    session_id = await _risky_running(api)
    enabled = await _invoke(
        api,
        AUTHORING,
        operation="update_workflow",
        workflowId="risky",
        fields={"status": "published"},
    )
    assert enabled["result"]["ok"], enabled
    model.add(reply("Done."))
    turn = await api.post("/v1/agent/execute", json={"sessionId": session_id, "instruction": "hi"})
    assert turn.status_code == 200, turn.text
    assert "has been disabled" not in str(model.requests[0].messages[0]["content"])
    assert "agent_hello_world" in model.offered_tools(0)
    assert await _active(api, session_id) == "risky"


async def test_a_disabled_workflow_does_not_hold_the_session_by_its_transitions(
    api: httpx.AsyncClient,
) -> None:
    session_id = await _risky_running(api)  # risky allows no transition
    started = await _invoke(
        api, RUN, session_id, operation="start_workflow", workflowId="guided_calculation"
    )
    assert started["successful"], started
    assert started["result"]["previousWorkflowId"] == "risky"
    assert await _active(api, session_id) == "guided_calculation"
