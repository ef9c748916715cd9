from __future__ import annotations

import pytest
from pydantic import Field

from aptix.tools import ToolArgs, function_schema, parse_arguments


class _Args(ToolArgs):
    workflow_id: str | None = Field(None, description="The workflow.")
    include_examples: bool = Field(False, description="Include examples.")
    tags: list[str] = Field(default_factory=list, description="Tags.")
    count: int = Field(description="How many.")


@pytest.mark.parametrize(
    "text",
    [
        '{"workflowId": "w", "includeExamples": true, "count": 1}',
        '{"WorkflowId": "w", "IncludeExamples": true, "Count": 1}',
        '{"workflow_id": "w", "include_examples": true, "count": 1}',
    ],
)
def test_camel_pascal_and_snake_keys_are_accepted(text: str) -> None:
    parsed = parse_arguments(_Args, text)
    assert parsed.result == _Args(workflow_id="w", include_examples=True, count=1)


def test_unknown_keys_are_ignored() -> None:
    parsed = parse_arguments(_Args, '{"count": 2, "sessionId": "x"}')
    assert parsed.successful


def test_errors_name_the_field() -> None:
    parsed = parse_arguments(_Args, '{"count": "many"}')
    assert parsed.error_message == (
        "Invalid arguments: 'count': input should be a valid integer, "
        "unable to parse string as an integer."
    )


def test_schema_is_camel_case_with_descriptions_and_required() -> None:
    schema = function_schema("t", "Test.", _Args, required=("workflow_id",))
    assert schema == {
        "type": "function",
        "name": "t",
        "description": "Test.",
        "parameters": {
            "type": "object",
            "properties": {
                "workflowId": {"type": "string", "description": "The workflow."},
                "includeExamples": {"type": "boolean", "description": "Include examples."},
                "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags."},
                "count": {"type": "integer", "description": "How many."},
            },
            "required": ["workflowId", "count"],
        },
    }


def test_a_field_without_description_is_a_programming_error() -> None:
    class Bad(ToolArgs):
        x: int = 0

    with pytest.raises(ValueError, match=r"Bad.x needs a description"):
        function_schema("bad", "Bad.", Bad)
