from __future__ import annotations

import json
from typing import Any

import pytest

from aptix.testing import RecordingLogger
from aptix.tools import AgentToolExecutionContext
from aptix.tools.builtin.workflow_registry import WorkflowRegistryTool
from aptix.workflows.registry import WorkflowRegistry
from tests.workflows.conftest import make_manifest


@pytest.fixture
def tool(registry: WorkflowRegistry, logger: RecordingLogger) -> WorkflowRegistryTool:
    return WorkflowRegistryTool(registry, logger)


async def call(tool: WorkflowRegistryTool, context: AgentToolExecutionContext, **args: Any) -> Any:
    outcome = await tool.execute(json.dumps(args), context)
    assert outcome.successful, outcome.error_message
    assert outcome.result is not None
    return json.loads(outcome.result)


async def error_of(
    tool: WorkflowRegistryTool, context: AgentToolExecutionContext, arguments: str
) -> str:
    outcome = await tool.execute(arguments, context)
    assert not outcome.successful
    assert outcome.error_message is not None
    return outcome.error_message


async def test_list_shows_public_and_experimental_runnable_workflows_only(tool, context) -> None:
    payload = await call(tool, context, operation="list_workflows")
    ids = [row["workflowId"] for row in payload["workflows"]]
    assert ids == ["beta_forecast", "create_report", "old_export", "summarise_numbers"]
    assert set(payload["workflows"][0]) == {
        "workflowId",
        "title",
        "description",
        "userIntentPatterns",
    }


async def test_list_accepts_pascal_case_arguments(tool, context) -> None:
    outcome = await tool.execute('{"Operation": "list_workflows"}', context)
    assert outcome.successful


async def test_manifest_is_the_full_camel_case_manifest(tool, context) -> None:
    payload = await call(
        tool, context, operation="get_workflow_manifest", workflowId="create_report"
    )
    workflow = payload["workflow"]
    for key in (
        "workflowId",
        "title",
        "description",
        "userIntentPatterns",
        "requiredInputs",
        "instructionText",
        "permittedTools",
        "completionCriteria",
        "followUpOptions",
        "preconditions",
        "notes",
        "version",
        "status",
        "visibility",
        "autoStart",
        "requiresApproval",
        "destructiveActions",
        "allowedTransitions",
    ):
        assert key in workflow
    assert workflow["status"] == "published"
    assert "warnings" not in payload


async def test_hidden_workflow_is_returned_when_named_by_id(tool, context) -> None:
    payload = await call(
        tool, context, operation="get_workflow_manifest", workflowId="secret_cleanup"
    )
    assert payload["workflow"]["visibility"] == "hidden"


async def test_deprecated_manifest_carries_a_warning(tool, context) -> None:
    payload = await call(tool, context, operation="get_workflow_manifest", workflowId="old_export")
    assert payload["warnings"] == [
        "Workflow 'old_export' is deprecated; it still runs but may be removed."
    ]


async def test_experimental_manifest_asks_for_confirmation(tool, context) -> None:
    payload = await call(
        tool, context, operation="get_workflow_manifest", workflowId="beta_forecast"
    )
    assert "experimental" in payload["warnings"][0]


async def test_approval_requirement_is_announced(registry, logger, context) -> None:
    registry.publish(make_manifest("wipe", requiresApproval=True, destructiveActions=["wipe"]))
    payload = await call(
        WorkflowRegistryTool(registry, logger),
        context,
        operation="get_workflow_manifest",
        workflowId="wipe",
    )
    assert "requires approval before use" in payload["warnings"][0]


async def test_disabled_manifest_is_refused(tool, context) -> None:
    message = await error_of(
        tool, context, '{"operation": "get_workflow_manifest", "workflowId": "broken_import"}'
    )
    assert message == "Workflow 'broken_import' is disabled and cannot be run."


async def test_unknown_workflow_is_refused(tool, context) -> None:
    message = await error_of(
        tool, context, '{"operation": "get_workflow_manifest", "workflowId": "xyz"}'
    )
    assert message == "Unknown workflow 'xyz'."


async def test_incomplete_manifest_is_refused(registry, logger, context) -> None:
    registry.publish(make_manifest("half", instructionText="", permittedTools=["agent_gone"]))
    message = await error_of(
        WorkflowRegistryTool(registry, logger),
        context,
        '{"operation": "get_workflow_manifest", "workflowId": "half"}',
    )
    assert message.startswith("Workflow 'half' is incomplete: instructionText is missing.")
    assert "unknown tool 'agent_gone'" in message


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            "{}",
            "Missing 'operation'. "
            "Use one of: list_workflows, get_workflow_manifest, match_workflow.",
        ),
        ('{"operation": "  "}', "Missing 'operation'."),
        ('{"operation": "run_workflow"}', "Unknown operation 'run_workflow'."),
        (
            '{"operation": "get_workflow_manifest"}',
            "Operation 'get_workflow_manifest' requires a non-empty 'workflowId'.",
        ),
        (
            '{"operation": "get_workflow_manifest", "workflowId": ""}',
            "requires a non-empty 'workflowId'",
        ),
        (
            '{"operation": "match_workflow"}',
            "Operation 'match_workflow' requires a non-empty 'userMessage'.",
        ),
        (
            '{"operation": "match_workflow", "userMessage": "   "}',
            "requires a non-empty 'userMessage'",
        ),
        ("not json", "Arguments must be a valid JSON object"),
        ('{"operation": "match_workflow", "userMessage": "x", "limit": 0}', "'limit'"),
    ],
)
async def test_guardrails_fail_with_a_clear_message(tool, context, arguments, expected) -> None:
    assert expected in await error_of(tool, context, arguments)


async def test_oversized_message_is_refused(tool, context) -> None:
    message = await error_of(
        tool, context, json.dumps({"operation": "match_workflow", "userMessage": "x" * 5000})
    )
    assert "too long" in message


async def test_match_ranks_the_fitting_workflow_first(tool, context) -> None:
    payload = await call(
        tool,
        context,
        operation="match_workflow",
        userMessage="please create a sales report for march",
    )
    top = payload["matches"][0]
    assert top["workflowId"] == "create_report"
    assert top["title"] == "Title of create_report"
    assert 0.45 <= top["matchScore"] < 1.0
    assert top["runnable"] is True
    assert "note" not in top
    scores = [m["matchScore"] for m in payload["matches"]]
    assert scores == sorted(scores, reverse=True)


async def test_match_shows_disabled_workflows_as_not_runnable_with_the_reason(
    tool, context
) -> None:
    payload = await call(
        tool, context, operation="match_workflow", userMessage="import the customer list"
    )
    row = next(m for m in payload["matches"] if m["workflowId"] == "broken_import")
    assert row["runnable"] is False
    assert row["note"] == "Workflow 'broken_import' is disabled and cannot be run."


async def test_match_notes_deprecated_workflows(tool, context) -> None:
    payload = await call(
        tool, context, operation="match_workflow", userMessage="export the customer list"
    )
    row = payload["matches"][0]
    assert row["workflowId"] == "old_export"
    assert row["runnable"] is True
    assert "deprecated" in row["note"]


async def test_hidden_workflows_match_only_on_explicit_initiation(tool, context) -> None:
    inferred = await call(
        tool, context, operation="match_workflow", userMessage="clean up the secret store"
    )
    assert all(m["workflowId"] != "secret_cleanup" for m in inferred["matches"])
    explicit = await call(
        tool, context, operation="match_workflow", userMessage="use workflow: secret_cleanup"
    )
    assert explicit["matches"] == [
        {
            "workflowId": "secret_cleanup",
            "title": "Title of secret_cleanup",
            "matchScore": 1.0,
            "runnable": True,
            "why": "named explicitly",
        }
    ]


@pytest.mark.parametrize(
    "message",
    [
        "Use workflow: summarise_numbers",
        "start the summarise-numbers workflow",
        "please run workflow summarise_numbers now",
        "Start the Summarise Numbers workflow.",
    ],
)
async def test_explicit_initiation_scores_one(tool, context, message) -> None:
    payload = await call(tool, context, operation="match_workflow", userMessage=message)
    assert payload["matches"][0]["workflowId"] == "summarise_numbers"
    assert payload["matches"][0]["matchScore"] == 1.0


async def test_off_topic_messages_match_nothing(tool, context) -> None:
    payload = await call(tool, context, operation="match_workflow", userMessage="what time is it?")
    assert payload == {"matches": []}


async def test_limit_caps_the_matches(tool, context) -> None:
    payload = await call(
        tool, context, operation="match_workflow", userMessage="the customer list", limit=1
    )
    assert len(payload["matches"]) == 1


async def test_the_tool_never_changes_the_registry(tool, registry, context) -> None:
    before = (registry.revision, [m.to_wire() for m in registry.all()])
    for args in (
        {"operation": "list_workflows"},
        {"operation": "get_workflow_manifest", "workflowId": "create_report"},
        {"operation": "match_workflow", "userMessage": "use workflow: create_report"},
    ):
        await call(tool, context, **args)
    assert (registry.revision, [m.to_wire() for m in registry.all()]) == before


async def test_unexpected_exceptions_are_logged_and_generic(
    registry, logger, context, monkeypatch
) -> None:
    def boom(*_: object) -> None:
        raise RuntimeError("index exploded")

    monkeypatch.setattr(registry.matcher, "explain", boom)
    tool = WorkflowRegistryTool(registry, logger)
    message = await error_of(tool, context, '{"operation": "match_workflow", "userMessage": "hi"}')
    assert message == "The workflow registry failed unexpectedly. The error has been logged."
    assert logger.of_kind("exception")[0].tag == "[agent_workflow_registry_ExecuteAsync__Exception]"


def test_schema_requires_operation_and_lists_the_operations() -> None:
    schema = WorkflowRegistryTool.schema()
    assert schema["name"] == "agent_workflow_registry"
    assert schema["parameters"]["required"] == ["operation"]
    assert schema["parameters"]["properties"]["operation"]["enum"] == [
        "list_workflows",
        "get_workflow_manifest",
        "match_workflow",
    ]
    assert WorkflowRegistryTool.is_fully_executed_on_server is True
