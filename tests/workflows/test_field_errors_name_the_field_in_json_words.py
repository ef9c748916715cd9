"""Type errors name the exact field and speak of lists and objects (review r3-F4).

A required input without ``name`` was reported as "requiredInputs is missing." (the list was
given), and an object where a list belongs as "Input should be a valid tuple".
"""

from __future__ import annotations

from typing import Any

import pytest

from aptix.workflows.validation import parse_manifest
from tests.workflows.conftest import succeeded


@pytest.mark.parametrize(
    ("fields", "errors"),
    [
        (
            {"requiredInputs": [{"description": "no name"}]},
            [{"field": "requiredInputs.0.name", "message": "requiredInputs.0.name is missing."}],
        ),
        (
            {"requiredInputs": [{"name": "a"}, {"nam": "x"}]},
            [
                {"field": "requiredInputs.1.name", "message": "requiredInputs.1.name is missing."},
                {
                    "field": "requiredInputs.1.nam",
                    "message": "'requiredInputs.1.nam' is not a workflow manifest field.",
                },
            ],
        ),
        (
            {"requiredInputs": {"name": "a"}},
            [{"field": "requiredInputs", "message": "requiredInputs: Input should be a list."}],
        ),
        (
            {"notes": {"a": "b"}},
            [{"field": "notes", "message": "notes: Input should be a list."}],
        ),
        (
            {"requiredInputs": [5]},
            [
                {
                    "field": "requiredInputs",
                    "message": "requiredInputs.0: Input should be an object.",
                }
            ],
        ),
    ],
)
async def test_update_workflow_names_the_field_and_its_json_type(
    tool, context, fields: dict[str, Any], errors: list[dict[str, str]]
) -> None:
    args = {"workflowId": "kit", "title": "Kit", "description": "Orders kit."}
    assert (await succeeded(tool, context, operation="draft_workflow", **args))["ok"]
    result = await succeeded(
        tool, context, operation="update_workflow", workflowId="kit", fields=fields
    )
    assert result["ok"] is False
    assert result["errors"] == errors


def test_a_missing_top_level_field_is_still_named_alone() -> None:
    _, problems = parse_manifest({"title": "T"})
    assert [p.to_wire() for p in problems] == [
        {"field": "workflowId", "message": "workflowId is missing."}
    ]


def test_one_required_input_name_is_a_one_item_list() -> None:
    manifest, problems = parse_manifest({"workflowId": "kit", "requiredInputs": "size"})
    assert problems == []
    assert manifest is not None
    assert [i.name for i in manifest.required_inputs] == ["size"]
