from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from aptix.testing import RecordingLogger
from aptix.tools import AgentToolExecutionContext
from aptix.tools.builtin.workflow_run import WorkflowRunTool
from aptix.workflows.registry import WorkflowRegistry
from tests.workflows.conftest import FakeSessionManager, make_manifest


@pytest.fixture
async def session_context(
    sessions: FakeSessionManager, context: AgentToolExecutionContext
) -> AgentToolExecutionContext:
    await sessions.create_session(org=context.org, user=context.user, session_id=context.session_id)
    return context


@pytest.fixture
def tool(registry: WorkflowRegistry, sessions, logger: RecordingLogger) -> WorkflowRunTool:
    return WorkflowRunTool(registry, sessions, logger)


async def ok(tool: WorkflowRunTool, context: AgentToolExecutionContext, **args: Any) -> Any:
    outcome = await tool.execute(json.dumps(args), context)
    assert outcome.successful, outcome.error_message
    return json.loads(outcome.result or "")


async def refused(tool: WorkflowRunTool, context: AgentToolExecutionContext, **args: Any) -> str:
    outcome = await tool.execute(json.dumps(args), context)
    assert not outcome.successful
    return outcome.error_message or ""


def active(sessions: FakeSessionManager, context: AgentToolExecutionContext) -> str | None:
    return sessions.sessions[context.session_id or ""].active_workflow_id


async def test_start_sets_the_active_workflow_and_reports_the_permitted_tools(
    tool, sessions, session_context
) -> None:
    payload = await ok(
        tool, session_context, operation="start_workflow", workflowId="create_report"
    )
    assert active(sessions, session_context) == "create_report"
    assert payload["state"] == "active"
    assert payload["version"] == "1.0.0"
    assert payload["permittedTools"] == sorted(
        {
            "agent_calculator",
            "agent_change_mode",
            "agent_list_modes",
            "agent_workflow_registry",
            "agent_workflow_run",
            "request_user_approval",
        }
    )


async def test_complete_requires_a_summary_and_returns_the_follow_up_options(
    tool, sessions, session_context
) -> None:
    await ok(tool, session_context, operation="start_workflow", workflowId="create_report")
    message = await refused(
        tool, session_context, operation="complete_workflow", workflowId="create_report"
    )
    assert message == (
        "Operation 'complete_workflow' requires a non-empty 'summary' "
        "of what the workflow achieved."
    )
    payload = await ok(
        tool,
        session_context,
        operation="complete_workflow",
        workflowId="create_report",
        summary="Report sent.",
    )
    assert payload == {
        "workflowId": "create_report",
        "state": "completed",
        "summary": "Report sent.",
        "followUpOptions": ["Do it again."],
    }
    assert active(sessions, session_context) is None


async def test_cancel_clears_the_active_workflow(tool, sessions, session_context) -> None:
    await ok(tool, session_context, operation="start_workflow", workflowId="create_report")
    payload = await ok(
        tool,
        session_context,
        operation="cancel_workflow",
        workflowId="create_report",
        reason="User stopped.",
    )
    assert payload == {
        "workflowId": "create_report",
        "state": "cancelled",
        "reason": "User stopped.",
    }
    assert active(sessions, session_context) is None


async def test_second_start_is_refused_without_an_allowed_transition(
    tool, sessions, session_context
) -> None:
    await ok(tool, session_context, operation="start_workflow", workflowId="summarise_numbers")
    message = await refused(
        tool, session_context, operation="start_workflow", workflowId="create_report"
    )
    assert message == (
        "Workflow 'summarise_numbers' is active; complete or cancel it before starting "
        "'create_report' (its manifest does not allow that transition)."
    )
    assert active(sessions, session_context) == "summarise_numbers"


async def test_an_allowed_transition_switches_the_workflow(tool, sessions, session_context) -> None:
    await ok(tool, session_context, operation="start_workflow", workflowId="create_report")
    payload = await ok(
        tool, session_context, operation="start_workflow", workflowId="summarise_numbers"
    )
    assert payload["previousWorkflowId"] == "create_report"
    assert active(sessions, session_context) == "summarise_numbers"


async def test_wildcard_transition_allows_any_workflow(
    registry, sessions, logger, session_context
) -> None:
    registry.publish(make_manifest("hub", allowedTransitions=["*"]))
    tool = WorkflowRunTool(registry, sessions, logger)
    await ok(tool, session_context, operation="start_workflow", workflowId="hub")
    await ok(tool, session_context, operation="start_workflow", workflowId="old_export")
    assert active(sessions, session_context) == "old_export"


async def test_starting_the_active_workflow_again_is_refused(tool, session_context) -> None:
    await ok(tool, session_context, operation="start_workflow", workflowId="create_report")
    message = await refused(
        tool, session_context, operation="start_workflow", workflowId="create_report"
    )
    assert message == "Workflow 'create_report' is already active in this session."


async def test_disabled_and_unknown_workflows_cannot_start(tool, sessions, session_context) -> None:
    assert await refused(
        tool, session_context, operation="start_workflow", workflowId="broken_import"
    ) == ("Workflow 'broken_import' is disabled and cannot be run.")
    assert await refused(tool, session_context, operation="start_workflow", workflowId="xyz") == (
        "Unknown workflow 'xyz'."
    )
    assert sessions.calls == []


async def test_deprecated_workflows_start_with_a_warning(tool, session_context) -> None:
    payload = await ok(tool, session_context, operation="start_workflow", workflowId="old_export")
    assert "deprecated" in payload["warnings"][0]


async def test_hidden_workflows_start_by_id(tool, sessions, session_context) -> None:
    await ok(tool, session_context, operation="start_workflow", workflowId="secret_cleanup")
    assert active(sessions, session_context) == "secret_cleanup"


async def test_complete_and_cancel_need_the_active_workflow(tool, session_context) -> None:
    assert await refused(
        tool, session_context, operation="cancel_workflow", workflowId="create_report"
    ) == ("No workflow is active in this session.")
    await ok(tool, session_context, operation="start_workflow", workflowId="create_report")
    assert (
        await refused(
            tool,
            session_context,
            operation="complete_workflow",
            workflowId="old_export",
            summary="x",
        )
        == "Workflow 'old_export' is not the active workflow ('create_report' is)."
    )


async def test_a_removed_active_workflow_can_still_be_left(tool, registry, session_context) -> None:
    await ok(tool, session_context, operation="start_workflow", workflowId="create_report")
    registry.remove("create_report")
    payload = await ok(
        tool,
        session_context,
        operation="complete_workflow",
        workflowId="create_report",
        summary="Done.",
    )
    assert payload["followUpOptions"] == []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            {},
            "Missing 'operation'. Use one of: start_workflow, complete_workflow, cancel_workflow.",
        ),
        ({"operation": "pause_workflow", "workflowId": "a"}, "Unknown operation 'pause_workflow'."),
        (
            {"operation": "start_workflow"},
            "Operation 'start_workflow' requires a non-empty 'workflowId'.",
        ),
    ],
)
async def test_argument_guardrails(tool, session_context, args, expected) -> None:
    assert expected in await refused(tool, session_context, **args)


async def test_a_session_is_required(tool, context) -> None:
    no_session = dataclasses.replace(context, session_id=None)
    assert await refused(
        tool, no_session, operation="start_workflow", workflowId="create_report"
    ) == ("agent_workflow_run needs a session: this call has no session id.")
    assert await refused(tool, context, operation="start_workflow", workflowId="create_report") == (
        f"Session '{context.session_id}' was not found."
    )


async def test_another_orgs_session_is_not_found(tool, sessions, session_context) -> None:
    other = dataclasses.replace(session_context, org="globex")
    message = await refused(tool, other, operation="start_workflow", workflowId="create_report")
    assert message == f"Session '{other.session_id}' was not found."


async def test_session_manager_failures_are_logged_and_generic(
    tool, sessions, logger, session_context, monkeypatch
) -> None:
    async def boom(*_: object, **__: object) -> None:
        raise RuntimeError("the manager broke")

    monkeypatch.setattr(sessions, "set_active_workflow", boom)
    message = await refused(
        tool, session_context, operation="start_workflow", workflowId="create_report"
    )
    assert message == "The workflow run tool failed unexpectedly. The error has been logged."
    assert logger.of_kind("exception")[0].tag == "[agent_workflow_run_ExecuteAsync__Exception]"

    async def gone(*_: object, **__: object) -> None:
        raise ConnectionError("database gone")

    # An outage is not the tool's failure: it passes on, for the surface to say so (issue 20).
    monkeypatch.setattr(sessions, "set_active_workflow", gone)
    with pytest.raises(ConnectionError):
        await refused(tool, session_context, operation="start_workflow", workflowId="create_report")
    assert len(logger.of_kind("exception")) == 1
