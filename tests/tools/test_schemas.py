"""Every registered tool's schema is valid JSON Schema and fits the openai tool types."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam
from pydantic import TypeAdapter

from aptix.runtime import BUILTIN_TOOLS
from aptix.tools.registry import SIMPLE_TYPES, schema_problem

TOOLS = {t.TOOL_NAME: t for t in BUILTIN_TOOLS}
SCHEMAS = {name: t.schema() for name, t in TOOLS.items()}


@pytest.fixture(params=sorted(SCHEMAS))
def schema(request: pytest.FixtureRequest) -> dict[str, Any]:
    return SCHEMAS[request.param]


def test_parameters_are_valid_json_schema(schema: dict[str, Any]) -> None:
    Draft202012Validator.check_schema(schema["parameters"])


def test_schema_has_the_tul011_shape(schema: dict[str, Any]) -> None:
    assert schema_problem(schema) is None
    for prop in schema["parameters"]["properties"].values():
        assert prop["type"] in SIMPLE_TYPES
        assert prop["description"].strip()


def test_schema_is_deterministic(schema: dict[str, Any]) -> None:
    tool_cls = TOOLS[schema["name"]]
    assert tool_cls.schema() == tool_cls.schema() == schema
    assert tool_cls.schema() is not tool_cls.schema()


def test_schema_is_accepted_by_openai_responses_tool_type(schema: dict[str, Any]) -> None:
    TypeAdapter(FunctionToolParam).validate_python({**schema, "strict": False})


def test_schema_is_accepted_by_openai_chat_tool_type(schema: dict[str, Any]) -> None:
    function = {k: schema[k] for k in ("name", "description", "parameters")}
    TypeAdapter(ChatCompletionFunctionToolParam).validate_python(
        {"type": "function", "function": function}
    )


def test_the_arguments_a_schema_requires_are_accepted(schema: dict[str, Any]) -> None:
    # A model that sends exactly the required properties passes the schema check.
    validator = Draft202012Validator(schema["parameters"])
    properties = schema["parameters"]["properties"]
    example = {
        name: properties[name]["enum"][0]
        if "enum" in properties[name]
        else {"string": "x", "boolean": True, "integer": 1, "number": 1.5}.get(
            properties[name]["type"], "x"
        )
        for name in schema["parameters"]["required"]
    }
    assert list(validator.iter_errors(example)) == []
