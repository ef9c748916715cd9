"""Fields that would change the answer's shape are refused, naming the field; models retrieve.

Driven by the real ``openai`` client in process.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest
from openai import AsyncOpenAI
from pydantic import BaseModel

from aptix.testing import ScriptedModel, reply

ASK: list[Any] = [{"role": "user", "content": "hello"}]


@pytest.fixture
def client(openai_client: AsyncOpenAI) -> AsyncOpenAI:
    return openai_client


REFUSED: list[tuple[str, dict[str, Any]]] = [
    ("n", {"n": 3}),
    (
        "response_format",
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": {"type": 5}, "strict": True},
            }
        },
    ),
    ("tool_choice", {"tool_choice": "required"}),
    ("tool_choice", {"tool_choice": "none"}),
    ("tool_choice", {"tool_choice": {"type": "function", "function": {"name": "f"}}}),
]


@pytest.mark.parametrize(("field", "extra"), REFUSED)
async def test_a_field_aptix_cannot_honour_is_a_400_naming_it(
    client: AsyncOpenAI, model: ScriptedModel, field: str, extra: dict[str, Any]
) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(model="aptix-general", messages=ASK, **extra)
    assert refused.value.code == "invalid_request_error"
    body = refused.value.body
    assert isinstance(body, dict)
    assert str(body["message"]).startswith(f"{field}: ")
    assert refused.value.param == field  # what OpenAI clients read to point at the field
    assert model.requests == []  # refused before any turn


async def test_a_message_aptix_cannot_read_is_named_in_param(
    client: AsyncOpenAI, model: ScriptedModel
) -> None:
    image = {"type": "image_url", "image_url": {"url": "http://x"}}
    unreadable = [
        *ASK,
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": [image]},
    ]
    cases: list[tuple[list[Any], str]] = [
        (unreadable, "messages[2]"),  # a content part that is not text
        ([{"role": "user", "content": " "}], "messages[0]"),  # the request is blank
        ([{"role": "user", "content": 5}], "messages[0]"),  # malformed: pydantic refuses it
        ([*ASK, {"role": "assistant", "content": "hi"}], "messages[1]"),  # asks nothing
    ]
    for messages, param in cases:
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(model="aptix-general", messages=messages)
        assert refused.value.param == param, refused.value.body
    assert model.requests == []


async def test_structured_output_parsing_is_passed_to_the_model(
    client: AsyncOpenAI, model: ScriptedModel
) -> None:
    class Answer(BaseModel):
        text: str

    model.add(reply('{"text": "hi"}'))
    completion = await client.chat.completions.parse(
        model="aptix-general", messages=ASK, response_format=Answer
    )
    assert completion.choices[0].message.parsed == Answer(text="hi")
    (asked,) = model.requests
    assert asked.response_format is not None
    assert asked.response_format["json_schema"]["name"] == "Answer"


async def test_the_default_values_of_those_fields_are_accepted(
    client: AsyncOpenAI, model: ScriptedModel
) -> None:
    model.add(reply("hi"))
    completion = await client.chat.completions.create(
        model="aptix-general",
        messages=ASK,
        n=1,
        response_format={"type": "text"},
        tool_choice="auto",
        temperature=1.7,  # sampling parameters stay ignored
    )
    assert completion.choices[0].message.content == "hi"


async def test_a_model_is_retrieved_by_its_name(client: AsyncOpenAI) -> None:
    found = await client.models.retrieve("aptix-calculation")
    assert (found.id, found.object, found.owned_by) == ("aptix-calculation", "model", "aptix")
    with pytest.raises(openai.NotFoundError) as missing:
        await client.models.retrieve("gpt-4o")
    assert missing.value.code == "model_not_found"
    body = missing.value.body
    assert isinstance(body, dict)
    assert body["type"] == "not_found_error"
    assert body["param"] is None  # about no field of a request
