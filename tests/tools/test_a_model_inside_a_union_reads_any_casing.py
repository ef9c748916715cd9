"""A nested object that is one of several models reads its keys in any casing too.

Review s2 F4 (round 70): keys were matched to a nested model's fields only when the field's
type had one shape besides ``None``, so ``pet: Cat | None`` read ``{"meowLevel": 3}`` while
``pet: Cat | Dog | None`` refused it (``'pet.meow_level': field required``), and so did
``list[Cat | Dog]``, where docs/http-api.md reads tool arguments in any case, nested objects
included. A key of such an object is now read as the field it spells in the models that
document it; a key two of them read as different fields is kept as sent.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

import aptix
from aptix import ToolArgs, parse_arguments
from aptix.testing import RecordingLogger
from aptix.tools.context import AgentToolExecutionContext

CONTEXT = AgentToolExecutionContext(org="acme", user="ann", conversation_id="c")


class _Owner(BaseModel):
    full_name: str


class _Cat(BaseModel):
    kind: Literal["cat"]
    meow_level: int
    owner: _Owner | None = None


class _Dog(BaseModel):
    kind: Literal["dog"]
    bark_level: int
    owner: _Owner | None = None


class _Either(ToolArgs):
    pet: _Cat | _Dog | None = Field(None, description="A pet.")


class _Tagged(ToolArgs):
    pet: Annotated[_Cat | _Dog, Field(discriminator="kind")] | None = Field(
        None, description="A pet."
    )


class _Many(ToolArgs):
    pets: list[_Cat | _Dog] = Field(default_factory=list, description="Pets.")


class _CatOrName(ToolArgs):
    pet: _Cat | str | None = Field(None, description="A pet or its name.")


class _CatOrCounts(ToolArgs):
    pet: _Cat | dict[str, int] | None = Field(None, description="A pet or counts.")


@pytest.mark.parametrize("model", [_Either, _Tagged, _CatOrName])
@pytest.mark.parametrize(
    "pet",
    [
        {"kind": "cat", "meowLevel": 3},
        {"Kind": "cat", "MeowLevel": 3},
        {"kind": "cat", "MEOW_LEVEL": 3},
        {"kind": "cat", "meow_level": 3},
    ],
)
def test_a_model_inside_a_union_reads_its_keys_in_any_casing(
    model: type[ToolArgs], pet: dict[str, Any]
) -> None:
    told = parse_arguments(model, json.dumps({"pet": pet}))
    assert told.result is not None, told.error_message
    assert told.result.model_dump()["pet"] == {"kind": "cat", "meow_level": 3, "owner": None}


@pytest.mark.parametrize("model", [_Either, _Tagged])
def test_each_model_of_a_union_reads_its_own_fields_and_nested_objects(
    model: type[ToolArgs],
) -> None:
    pet = {"Kind": "dog", "BarkLevel": 2, "Owner": {"FullName": "Ann"}}
    told = parse_arguments(model, json.dumps({"pet": pet}))
    assert told.result is not None, told.error_message
    assert told.result.model_dump()["pet"] == {
        "kind": "dog",
        "bark_level": 2,
        "owner": {"full_name": "Ann"},
    }


def test_a_list_of_a_union_of_models_reads_each_item_in_any_casing() -> None:
    pets = [{"kind": "cat", "meowLevel": 3}, {"KIND": "dog", "bark_level": 1}]
    told = parse_arguments(_Many, json.dumps({"pets": pets}))
    assert told.result is not None, told.error_message
    assert [type(pet).__name__ for pet in told.result.pets] == ["_Cat", "_Dog"]
    assert told.result.model_dump()["pets"][0]["meow_level"] == 3


@pytest.mark.parametrize(
    ("arguments", "refused"),
    [
        (
            {"pet": {"kind": "cat", "meowLevel": 1, "meow_level": 2}},
            "'pet.meow_level' is given twice ('meowLevel' and 'meow_level')",
        ),
        (
            {"pets": [{"kind": "dog", "barkLevel": 1, "BarkLevel": 2}]},
            "'pets.0.bark_level' is given twice ('barkLevel' and 'BarkLevel')",
        ),
    ],
)
def test_a_field_given_twice_inside_a_union_of_models_is_refused(
    arguments: dict[str, Any], refused: str
) -> None:
    model = _Many if "pets" in arguments else _Either
    told = parse_arguments(model, json.dumps(arguments))
    assert told.error_message == f"{refused}: use one casing per field."


def test_the_keys_of_a_map_beside_a_model_in_a_union_are_kept_as_sent() -> None:
    told = parse_arguments(_CatOrCounts, '{"pet": {"meowLevel": 1, "meow_level": 2}}')
    assert told.result is not None, told.error_message
    assert told.result.pet == {"meowLevel": 1, "meow_level": 2}


@aptix.tool(usage="Call this to test.")
async def adopt(pet: _Cat | _Dog) -> dict[str, Any]:
    """Tests.

    Args:
        pet: The pet.
    """
    return {"pet": pet.model_dump()}


async def test_a_decorated_tool_reads_a_model_inside_a_union_in_camel_case() -> None:
    told = await adopt(RecordingLogger()).execute(
        '{"pet": {"kind": "cat", "meowLevel": 3}}', CONTEXT
    )
    assert told.result is not None, told.error_message
    assert json.loads(told.result) == {"pet": {"kind": "cat", "meow_level": 3, "owner": None}}
