from __future__ import annotations

import json
from typing import Any

import pytest

from aptix.tools import AgentToolExecutionContext
from aptix.tools.builtin.workflow_authoring import WorkflowAuthoringTool
from aptix.tools.builtin.workflow_registry import WorkflowRegistryTool
from aptix.workflows.authoring import WorkflowAuthoring
from aptix.workflows.store import RevisionAction
from tests.workflows.conftest import succeeded

COMPLETE = {
    "UserIntentPatterns": ["onboard a new employee", "a new hire starts monday"],
    "requiredInputs": [{"name": "employeeName", "description": "Who is starting."}],
    "instructionText": "1. Ask for the name.\n2. Greet them with agent_hello_world.",
    "permittedTools": ["agent_hello_world"],
    "completionCriteria": ["The new hire was greeted."],
}


async def draft(tool, context, workflow_id: str = "onboard_hire") -> Any:
    return await succeeded(
        tool,
        context,
        operation="draft_workflow",
        workflowId=workflow_id,
        title="Onboard a new hire",
        description="Welcomes a new employee.",
    )


async def update(
    tool: WorkflowAuthoringTool,
    context: AgentToolExecutionContext,
    fields: Any,
    workflow_id: str = "onboard_hire",
) -> Any:
    """``update_workflow`` with ``fields``."""
    return await succeeded(
        tool, context, operation="update_workflow", workflowId=workflow_id, fields=fields
    )


async def publish(
    tool: WorkflowAuthoringTool,
    context: AgentToolExecutionContext,
    workflow_id: str = "onboard_hire",
) -> Any:
    """``publish_workflow``."""
    return await succeeded(tool, context, operation="publish_workflow", workflowId=workflow_id)


async def test_round_trip_draft_update_validate_publish_and_serve(
    tool, registry, logger, context
) -> None:
    drafted = await draft(tool, context)
    assert drafted["ok"] is True
    assert drafted["workflow"]["status"] == "draft"
    assert drafted["workflow"]["version"] == "0.1.0"
    assert set(drafted) == {"ok", "workflow", "messages", "revision"}
    assert registry.get("onboard_hire", "acme") is None  # drafts are not served

    failing = await succeeded(
        tool, context, operation="validate_workflow", workflowId="onboard_hire"
    )
    assert failing["ok"] is False
    fields = {e["field"] for e in failing["errors"]}
    assert {"instructionText", "userIntentPatterns", "completionCriteria"} <= fields
    assert {"field": "instructionText", "message": "instructionText is missing."} in failing[
        "errors"
    ]
    assert set(failing) == {"ok", "errors", "revision"}  # the revision it checked

    refused = await publish(tool, context)
    assert refused["ok"] is False

    updated = await update(tool, context, COMPLETE)
    assert updated["ok"] is True
    assert updated["workflow"]["userIntentPatterns"] == COMPLETE["UserIntentPatterns"]

    passing = await succeeded(
        tool, context, operation="validate_workflow", workflowId="onboard_hire"
    )
    assert passing == {
        "ok": True,
        "workflow": passing["workflow"],
        "messages": ["Workflow 'onboard_hire' 0.1.0 is valid."],
        "revision": 2,
    }

    published = await publish(tool, context)
    assert published["ok"] is True
    assert published["workflow"]["status"] == "published"

    registry_tool = WorkflowRegistryTool(registry, logger)
    listed = json.loads(
        (await registry_tool.execute('{"operation":"list_workflows"}', context)).result or ""
    )
    assert "onboard_hire" in [w["workflowId"] for w in listed["workflows"]]
    matched = json.loads(
        (
            await registry_tool.execute(
                '{"operation":"match_workflow","userMessage":"we have a new hire starting monday"}',
                context,
            )
        ).result
        or ""
    )
    assert matched["matches"][0]["workflowId"] == "onboard_hire"


async def test_editing_a_published_workflow_creates_a_draft_and_keeps_serving(
    tool, registry, store, context
) -> None:
    await draft(tool, context)
    await update(tool, context, COMPLETE)
    await publish(tool, context)

    edited = await update(tool, context, {"title": "Onboard a new colleague"})
    assert edited["workflow"]["status"] == "draft"
    assert any("stays served" in m for m in edited["messages"])
    served = registry.get("onboard_hire", "acme")
    assert served is not None
    assert served.title == "Onboard a new hire"

    fetched = await succeeded(tool, context, operation="get_workflow", workflowId="onboard_hire")
    assert fetched["workflow"]["title"] == "Onboard a new colleague"
    listed = await succeeded(tool, context, operation="list_authoring_workflows")
    row = next(r for r in listed["workflows"] if r["workflowId"] == "onboard_hire")
    assert row == {
        "workflowId": "onboard_hire",
        "title": "Onboard a new colleague",
        "status": "draft",
        "version": "0.1.1",
        "visibility": "public",
        "publishedVersion": "0.1.0",
        "publishedStatus": "published",
        "publishedTitle": "Onboard a new hire",
        "publishedVisibility": "public",
        "revision": 4,
    }

    await update(tool, context, {"version": "0.1.0"})
    same_version = await publish(tool, context)
    assert same_version == {
        "ok": False,
        "errors": [
            {
                "field": "version",
                "message": "version 0.1.0 must be greater than the published version 0.1.0.",
            }
        ],
    }
    await update(tool, context, {"Version": "0.2.0"})
    again = await publish(tool, context)
    assert again["ok"] is True
    served = registry.get("onboard_hire", "acme")
    assert served is not None
    assert (served.title, served.version) == ("Onboard a new colleague", "0.2.0")

    history = await store.history("onboard_hire", "acme")
    assert [h.action for h in history] == [
        RevisionAction.DRAFT,
        RevisionAction.UPDATE,
        RevisionAction.PUBLISH,
        RevisionAction.UPDATE,
        RevisionAction.UPDATE,
        RevisionAction.UPDATE,
        RevisionAction.PUBLISH,
    ]
    assert [h.revision for h in history] == [1, 2, 3, 4, 5, 6, 7]
    assert history[2].manifest.version == "0.1.0"
    assert history[0].created_by == "ann"


READ_ONLY = (
    "Workflow 'create_report' is defined in test for the whole deployment and is read-only to "
    "authoring; it changes through its file and a review (TUL-006 §8.2)."
)


async def test_a_built_in_workflow_is_read_only_to_authoring(tool, registry, context) -> None:
    before = registry.get("create_report", "acme")
    for fields in ({"notes": ["New note."]}, {"status": "disabled"}):
        edited = await update(tool, context, fields, workflow_id="create_report")
        assert edited == {"ok": False, "errors": [{"field": "workflowId", "message": READ_ONLY}]}
    assert registry.get("create_report", "acme") is before
    readable = await succeeded(tool, context, operation="get_workflow", workflowId="create_report")
    assert readable["workflow"]["workflowId"] == "create_report"
    listed = await succeeded(tool, context, operation="list_authoring_workflows")
    row = next(r for r in listed["workflows"] if r["workflowId"] == "create_report")
    assert row["readOnly"] is True


async def test_update_rejects_unknown_fields_and_wrong_types(tool, context) -> None:
    await draft(tool, context)
    unknown = await update(tool, context, {"workflowId": "x", "colour": "red"})
    assert unknown["ok"] is False
    assert [e["field"] for e in unknown["errors"]] == ["workflowId", "colour"]
    assert unknown["errors"][1]["message"].startswith(
        "'colour' cannot be updated. Allowed fields: title"
    )
    typed = await update(tool, context, {"permittedTools": 5, "version": "one"})
    assert typed["ok"] is False
    assert {e["field"] for e in typed["errors"]} == {"permittedTools", "version"}


async def test_mandatory_fields_cannot_be_removed(tool, context) -> None:
    await draft(tool, context)
    await update(tool, context, COMPLETE)
    removed = await update(tool, context, {"instructionText": "", "title": None})
    assert removed["ok"] is False
    assert {
        "field": "instructionText",
        "message": "instructionText is mandatory and cannot be removed.",
    } in removed["errors"]


async def test_validation_reports_unknown_tools_invalid_patterns_and_inconsistencies(
    tool, context
) -> None:
    await draft(tool, context)
    await update(
        tool,
        context,
        {
            # One spelling each: COMPLETE's UserIntentPatterns beside it would be refused.
            **{k: v for k, v in COMPLETE.items() if k != "UserIntentPatterns"},
            "userIntentPatterns": ["ok", "onboard someone", "Onboard  someone"],
            "permittedTools": ["agent_teleport"],
            "destructiveActions": ["deletes the old account"],
            "preconditions": ["HR approved", "hr approved"],
            "visibility": "hidden",
            "autoStart": True,
        },
    )
    result = await succeeded(
        tool, context, operation="validate_workflow", workflowId="onboard_hire"
    )
    messages = {e["field"]: e["message"] for e in result["errors"]}
    assert messages["userIntentPatterns.0"] == "Intent pattern 'ok' is too short to match anything."
    assert messages["userIntentPatterns.2"] == "Intent pattern 'Onboard  someone' is repeated."
    assert messages["permittedTools.0"] == "permittedTools names an unknown tool 'agent_teleport'."
    assert "requiresApproval" in messages
    assert messages["preconditions"] == "preconditions repeat an entry."
    assert messages["autoStart"].startswith("A hidden workflow cannot be autoStart")


@pytest.mark.parametrize(
    ("args", "field", "message"),
    [
        ({}, "operation", "Missing 'operation'."),
        ({"operation": "delete_everything"}, "operation", "Unknown operation 'delete_everything'."),
        (
            {"operation": "get_workflow"},
            "workflowId",
            "Operation 'get_workflow' requires a non-empty 'workflowId'.",
        ),
        (
            {"operation": "get_workflow", "workflowId": "nope"},
            "workflowId",
            "Unknown workflow 'nope'.",
        ),
        (
            {"operation": "update_workflow", "workflowId": "create_report"},
            "fields",
            "fields must name at least one field to set.",
        ),
        (
            {
                "operation": "draft_workflow",
                "workflowId": "Bad Id",
                "title": "t",
                "description": "d",
            },
            "workflowId",
            "workflowId: must be 1-64",
        ),
        ({"operation": "draft_workflow", "workflowId": "fine_id"}, "title", "title is missing."),
        (
            {
                "operation": "draft_workflow",
                "workflowId": "create_report",
                "title": "t",
                "description": "d",
            },
            "workflowId",
            "Workflow 'create_report' is defined in test for the whole deployment",
        ),
        (
            {"operation": "publish_workflow", "workflowId": "create_report"},
            "status",
            "has no draft to publish",
        ),
    ],
)
async def test_refusals_use_the_error_envelope(tool, context, args, field, message) -> None:
    result = await succeeded(tool, context, **args)
    assert result["ok"] is False
    assert result["errors"][0]["field"] == field
    assert message in result["errors"][0]["message"]


async def test_bad_json_uses_the_error_envelope(tool, context) -> None:
    outcome = await tool.execute("{", context)
    payload = json.loads(outcome.result or "")
    assert payload["ok"] is False
    assert "valid JSON object" in payload["errors"][0]["message"]


async def test_deprecate_then_disable_then_remove(tool, registry, store, context) -> None:
    await draft(tool, context)
    await update(tool, context, COMPLETE)
    await publish(tool, context)

    not_yet = await succeeded(tool, context, operation="remove_workflow", workflowId="onboard_hire")
    assert not_yet["errors"] == [
        {
            "field": "status",
            "message": "Workflow 'onboard_hire' must be disabled before it is removed.",
        }
    ]
    mixed = await update(tool, context, {"status": "deprecated", "title": "x"})
    assert mixed["errors"][0]["message"] == "Change status in an update_workflow call of its own."
    deprecated = await update(tool, context, {"Status": "deprecated"})
    assert deprecated["workflow"]["status"] == "deprecated"
    served = registry.get("onboard_hire", "acme")
    assert served is not None
    assert served.status.value == "deprecated"
    await update(tool, context, {"status": "disabled"})
    removed = await succeeded(tool, context, operation="remove_workflow", workflowId="onboard_hire")
    assert removed == {
        "ok": True,
        "messages": ["Workflow 'onboard_hire' was removed; its history is kept."],
        "revision": 6,
    }
    assert registry.get("onboard_hire", "acme") is None
    assert [h.action for h in await store.history("onboard_hire", "acme")][-3:] == [
        RevisionAction.STATUS,
        RevisionAction.STATUS,
        RevisionAction.REMOVE,
    ]


async def test_workflows_from_files_cannot_be_removed(tool, context) -> None:
    result = await succeeded(tool, context, operation="remove_workflow", workflowId="create_report")
    assert result["errors"][0]["message"] == READ_ONLY


async def test_re_publishing_after_removal_needs_a_greater_version(tool, context) -> None:
    await draft(tool, context)
    await update(tool, context, COMPLETE)
    await publish(tool, context)
    await update(tool, context, {"status": "disabled"})
    await succeeded(tool, context, operation="remove_workflow", workflowId="onboard_hire")
    again = await draft(tool, context)
    assert again["workflow"]["version"] == "0.2.0"


async def test_list_authoring_workflows_has_shallow_rows(tool, context) -> None:
    await draft(tool, context)
    listed = await succeeded(tool, context, operation="list_authoring_workflows")
    assert set(listed) == {"ok", "workflows"}
    row = next(r for r in listed["workflows"] if r["workflowId"] == "onboard_hire")
    assert row == {
        "workflowId": "onboard_hire",
        "title": "Onboard a new hire",
        "status": "draft",
        "version": "0.1.0",
        "visibility": "public",
        "revision": 1,
    }
    hidden = next(r for r in listed["workflows"] if r["workflowId"] == "secret_cleanup")
    assert hidden["visibility"] == "hidden"


async def test_unexpected_exceptions_are_logged(
    store, registry, logger, context, monkeypatch
) -> None:
    async def boom(*_: object) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(store, "history", boom)
    tool = WorkflowAuthoringTool(WorkflowAuthoring(store, registry), logger)
    outcome = await tool.execute('{"operation": "get_workflow", "workflowId": "zzz"}', context)
    assert (
        outcome.error_message
        == "The workflow authoring tool failed unexpectedly. The error has been logged."
    )
    assert (
        logger.of_kind("exception")[0].tag == "[agent_workflow_authoring_ExecuteAsync__Exception]"
    )
