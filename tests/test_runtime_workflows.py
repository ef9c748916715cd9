from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.tools import AgentToolCall


def settings(tmp_path: Path, **extra: object) -> AptixSettings:
    return AptixSettings(data_dir=tmp_path, semantic_matching=False, load_plugins=False, **extra)


async def test_the_runtime_serves_the_builtin_workflows_and_their_tools(tmp_path: Path) -> None:
    async with open_runtime(settings(tmp_path)) as runtime:
        assert runtime.workflows is not None
        assert runtime.workflows.registry.get("author_workflow", "acme") is not None
        for name in ("agent_workflow_registry", "agent_workflow_authoring"):
            assert runtime.registry.has_tool(name)


async def test_the_runtime_executor_enforces_permitted_tools(tmp_path: Path) -> None:
    async with open_runtime(settings(tmp_path)) as runtime:
        context = dataclasses.replace(
            runtime.tool_context(), active_workflow_id="guided_calculation"
        )
        refused = await runtime.executor.execute(
            AgentToolCall("c1", "agent_hello_world", '{"name": "Ann"}'), context
        )
        allowed = await runtime.executor.execute(
            AgentToolCall("c2", "agent_calculator", '{"expression": "6*7"}'), context
        )
    assert refused.error_message is not None
    assert refused.error_message.startswith("Workflow error:")
    assert allowed.was_executed


async def test_a_broken_workflows_path_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("workflowId: bad\nversion: nope\n", encoding="utf-8")
    from aptix.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match=r"bad.yaml \(workflow 'bad', field 'version'\)"):
        async with open_runtime(settings(tmp_path, workflows_path=tmp_path)):
            pass


async def call(runtime, name: str, args: dict[str, object], **context: object) -> dict:
    import json

    ctx = dataclasses.replace(runtime.tool_context(org="acme", user="ann", role="admin"), **context)
    outcome = await runtime.executor.invoke(name, json.dumps(args), ctx)
    assert outcome.successful, outcome.error_message
    return json.loads(outcome.result or "")


async def test_published_workflows_survive_a_restart_with_their_history(tmp_path: Path) -> None:
    fields = {
        "userIntentPatterns": ["plan a team offsite"],
        "instructionText": "1. Ask for dates.",
        "permittedTools": ["agent_calculator"],
        "completionCriteria": ["Dates agreed."],
    }
    async with open_runtime(settings(tmp_path)) as runtime:
        authoring = "agent_workflow_authoring"
        await call(
            runtime,
            authoring,
            {
                "operation": "draft_workflow",
                "workflowId": "offsite",
                "title": "Plan an offsite",
                "description": "Plans an offsite.",
            },
        )
        await call(
            runtime,
            authoring,
            {"operation": "update_workflow", "workflowId": "offsite", "fields": fields},
        )
        published = await call(
            runtime, authoring, {"operation": "publish_workflow", "workflowId": "offsite"}
        )
        assert published["ok"] is True
        await call(
            runtime,
            authoring,
            {
                "operation": "update_workflow",
                "workflowId": "offsite",
                "fields": {"title": "Plan a retreat"},
            },
        )

    async with open_runtime(settings(tmp_path)) as runtime:
        served = runtime.workflows.registry.get("offsite", "acme")
        assert served is not None
        assert (served.title, served.status.value) == ("Plan an offsite", "published")
        fetched = await call(
            runtime,
            "agent_workflow_authoring",
            {"operation": "get_workflow", "workflowId": "offsite"},
        )
        assert fetched["workflow"]["title"] == "Plan a retreat"
        history = await runtime.workflows.store.history("offsite", "acme")
        assert [h.action.value for h in history] == ["draft", "update", "publish", "update"]
        matched = await call(
            runtime,
            "agent_workflow_registry",
            {"operation": "match_workflow", "userMessage": "plan a team offsite"},
        )
        assert matched["matches"][0]["workflowId"] == "offsite"


async def test_a_stored_workflow_that_no_longer_validates_is_left_out_at_start(
    tmp_path: Path,
) -> None:
    from aptix.workflows.store import RevisionAction
    from tests.workflows.conftest import make_manifest

    async with open_runtime(settings(tmp_path)) as runtime:
        await runtime.workflows.store.append(
            make_manifest("legacy", permittedTools=["agent_removed_plugin"]),
            RevisionAction.PUBLISH,
            "ann",
            "acme",
        )
    # One org's stale workflow does not stop the deployment: it is left out (the warning it
    # gets is checked in tests/workflows/test_stored_invalid_revisions.py).
    async with open_runtime(settings(tmp_path)) as restarted:
        assert restarted.workflows.registry.get("legacy", "acme") is None
        assert restarted.workflows.registry.get("guided_calculation") is not None


async def test_workflow_run_uses_the_sql_session_store(tmp_path: Path) -> None:
    async with open_runtime(settings(tmp_path)) as runtime:
        created = await runtime.services.sessions.create_session(org="acme", user="ann")
        assert created.result is not None
        sid = created.result.id
        started = await call(
            runtime,
            "agent_workflow_run",
            {"operation": "start_workflow", "workflowId": "guided_calculation"},
            session_id=sid,
        )
        assert started["state"] == "active"
        session = await runtime.services.sessions.get_session(sid, "acme")
        assert session is not None
        assert session.active_workflow_id == "guided_calculation"
        refused = await runtime.executor.invoke(
            "agent_workflow_run",
            '{"operation": "start_workflow", "workflowId": "choose_mode"}',
            dataclasses.replace(
                runtime.tool_context(org="acme", user="ann", role="admin"), session_id=sid
            ),
        )
        assert refused.error_message is not None
        assert "is active; complete or cancel it" in refused.error_message
        done = await call(
            runtime,
            "agent_workflow_run",
            {"operation": "complete_workflow", "workflowId": "guided_calculation", "summary": "42"},
            session_id=sid,
        )
        assert done["followUpOptions"] == ["Run another calculation."]
        session = await runtime.services.sessions.get_session(sid, "acme")
        assert session is not None
        assert session.active_workflow_id is None
