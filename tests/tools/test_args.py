from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

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


class _Address(BaseModel):
    street: str
    zip_code: str | None = None


class _Shipping(ToolArgs):
    address: _Address = Field(description="Where to.")
    stops: list[_Address] | None = Field(None, description="On the way.")
    by_name: dict[str, _Address] = Field(default_factory=dict, description="Named places.")


@pytest.mark.parametrize(
    "text",
    [
        '{"Address": {"Street": "Main", "ZipCode": "1"}, "Stops": [{"Street": "B"}],'
        ' "ByName": {"home": {"Street": "H"}}}',
        '{"address": {"street": "Main", "zipCode": "1"}, "stops": [{"street": "B"}],'
        ' "byName": {"home": {"street": "H"}}}',
        '{"address": {"street": "Main", "zip_code": "1"}, "stops": [{"STREET": "B"}],'
        ' "by_name": {"home": {"Street": "H"}}}',
    ],
)
def test_nested_models_read_any_casing(text: str) -> None:
    parsed = parse_arguments(_Shipping, text)
    assert parsed.result is not None, parsed.error_message
    assert parsed.result.address == _Address(street="Main", zip_code="1")
    assert parsed.result.stops == [_Address(street="B")]
    assert parsed.result.by_name == {"home": _Address(street="H")}


def test_a_nested_key_sent_in_two_casings_is_refused() -> None:
    # One of the two values would go unread (review s2 F4): refused as at the top level.
    parsed = parse_arguments(_Shipping, '{"address": {"Street": "pascal", "street": "exact"}}')
    assert parsed.error_message == (
        "'address.street' is given twice ('Street' and 'street'): use one casing per field."
    )


class _Scale(ToolArgs):
    x: float = Field(description="The number.")


@pytest.mark.parametrize("text", ['{"x": 1e999}', '{"x": -1e999}', '{"x": NaN}', '{"x": Infinity}'])
def test_a_number_json_cannot_write_back_is_refused_by_its_field(text: str) -> None:
    # JSON has no NaN or infinity; Python reads 1e999 as one, and MCP's reader takes NaN
    # (review s3): the tool failed "unexpectedly" writing its result.
    parsed = parse_arguments(_Scale, text)
    assert parsed.error_message == "Invalid arguments: 'x': input should be a finite number."


def test_the_largest_float_and_negative_zero_are_read() -> None:
    assert parse_arguments(_Scale, '{"x": 1e308}').result == _Scale(x=1e308)
    assert str(parse_arguments(_Scale, '{"x": -0.0}').result) == "x=-0.0"
