"""A wrong value for one argument names that argument, and every problem of the call is listed.

``Arguments must be a JSON object.`` is kept for arguments that are not an object at all; a
nested model given a string is a field's problem like any other (review r6, F1).
"""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, Field

import aptix
from aptix.testing import RecordingLogger
from aptix.tools import (
    AgentToolCall,
    AgentToolExecutionContext,
    AgentToolExecutor,
    AgentToolRegistry,
    ToolArgs,
    parse_arguments,
)


class _Address(BaseModel):
    street: str = Field(description="Street.")
    zip: str = Field(description="Zip code.")


@aptix.tool(usage="Call to store an address.")
async def save_address(addr: _Address, label: str) -> str:
    """Stores an address.

    Args:
        addr: The address.
        label: A label for it.
    """
    return label


@aptix.tool(usage="Call to count addresses.")
async def count_addresses(addrs: list[_Address]) -> int:
    """Counts addresses.

    Args:
        addrs: The addresses.
    """
    return len(addrs)


async def _error(name: str, arguments: str, context: AgentToolExecutionContext) -> str:
    logger = RecordingLogger()
    registry = AgentToolRegistry(logger)
    registry.register(save_address)
    registry.register(count_addresses)
    done = await AgentToolExecutor(registry, logger).execute(
        AgentToolCall("c1", name, arguments), context
    )
    assert done.result_json is None
    return done.error_message or ""


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        (
            "save_address",
            '{"addr": "12 Main St", "label": "home"}',
            "Invalid arguments: 'addr': input should be a JSON object.",
        ),
        (
            "save_address",
            '{"addr": "12 Main St"}',
            "Invalid arguments: 'addr': input should be a JSON object; 'label': field required.",
        ),
        (
            "count_addresses",
            '{"addrs": [{"street": "a", "zip": "1"}, "oops"]}',
            "Invalid arguments: 'addrs.1': input should be a JSON object.",
        ),
        (
            "save_address",
            '{"addr": {"street": "a"}, "label": 5}',
            "Invalid arguments: 'addr.zip': field required; "
            "'label': input should be a valid string.",
        ),
    ],
)
async def test_a_nested_field_of_the_wrong_kind_is_named_with_the_other_problems(
    context: AgentToolExecutionContext, name: str, arguments: str, expected: str
) -> None:
    assert await _error(name, arguments, context) == expected


@pytest.mark.parametrize("arguments", ['"12 Main St"', "[1, 2]", "7"])
async def test_arguments_that_are_not_an_object_are_still_refused_as_a_whole(
    context: AgentToolExecutionContext, arguments: str
) -> None:
    assert await _error("save_address", arguments, context) == "Arguments must be a JSON object."


class _Args(ToolArgs):
    kind: Literal["Home", "Work"] = Field("Home", description="Which address.")
    code: str = Field("AB", pattern="^[A-Z]+$", description="Upper-case code.")
    tags: dict[str, int] = Field(default_factory=dict, description="Counts by tag.")


def test_class_tool_arguments_keep_the_case_of_quoted_values_and_say_json_object() -> None:
    parsed = parse_arguments(_Args, '{"kind": "x", "code": "ab", "tags": 5}')
    assert parsed.error_message == (
        "Invalid arguments: 'kind': input should be 'Home' or 'Work'; "
        "'code': string should match pattern '^[A-Z]+$'; 'tags': input should be a JSON object."
    )


class _Cat(BaseModel):
    kind: Literal["cat"] = Field(description="Always cat.")
    lives: int = Field(description="Lives left.")


class _Dog(BaseModel):
    kind: Literal["dog"] = Field(description="Always dog.")


class _Pets(ToolArgs):
    either: int | str = Field(0, description="A number or a name.")
    pet: _Cat | _Dog | None = Field(None, description="A pet.")
    first_name: int = Field(0, description="A field named in snake case.")


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        # pydantic's path holds the union's members ("either.int", "pet.Cat.kind"): not sent
        (
            '{"either": [1]}',
            "Invalid arguments: 'either': input should be a valid integer or "
            "input should be a valid string.",
        ),
        (
            '{"pet": {"kind": "cow"}}',
            "Invalid arguments: 'pet.kind': input should be 'cat' or input should be 'dog'; "
            "'pet.lives': field required.",
        ),
        ('{"firstName": "x"}', "Invalid arguments: 'firstName': input should be a valid integer"),
        ('{"first_name": "x"}', "Invalid arguments: 'firstName': input should be a valid integer"),
    ],
)
def test_a_union_fields_problems_name_only_what_was_sent(arguments: str, expected: str) -> None:
    parsed = parse_arguments(_Pets, arguments)
    assert parsed.error_message is not None
    assert parsed.error_message.startswith(expected)
