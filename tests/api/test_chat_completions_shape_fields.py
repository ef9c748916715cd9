"""Every OpenAI field that would change the answer's shape is refused naming it, or honoured.

The review found ``functions``, ``modalities``/``audio`` and ``logprobs`` answered 200 with a
plain completion. Driven by the real ``openai`` client in process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI

from aptix.api.openai.schemas import SHAPE_FIELDS
from aptix.testing import ScriptedModel, reply

ASK: list[Any] = [{"role": "user", "content": "hello"}]
LEGACY_FN = {"name": "legacy_fn", "parameters": {"type": "object", "properties": {}}}


@pytest.fixture
def client(openai_client: AsyncOpenAI) -> AsyncOpenAI:
    return openai_client


REFUSED: list[tuple[str, dict[str, Any]]] = [
    ("functions", {"functions": [LEGACY_FN]}),
    ("functions", {"functions": [LEGACY_FN], "function_call": {"name": "legacy_fn"}}),
    ("function_call", {"function_call": {"name": "legacy_fn"}}),
    ("function_call", {"function_call": "none"}),
    ("parallel_tool_calls", {"parallel_tool_calls": False}),
    ("modalities", {"modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"}}),
    ("modalities", {"modalities": ["audio"]}),
    ("audio", {"audio": {"voice": "alloy", "format": "wav"}}),
    ("logprobs", {"logprobs": True}),
    ("logprobs", {"logprobs": True, "top_logprobs": 3}),
    ("top_logprobs", {"top_logprobs": 3}),
    ("web_search_options", {"web_search_options": {"search_context_size": "low"}}),
    ("moderation", {"moderation": {"model": "omni-moderation-latest"}}),
]


@pytest.mark.parametrize(("field", "extra"), REFUSED)
@pytest.mark.parametrize("stream", [False, True])
async def test_a_field_that_changes_the_answers_shape_is_a_400_naming_it(
    client: AsyncOpenAI, model: ScriptedModel, field: str, extra: dict[str, Any], stream: bool
) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(
            model="aptix-general", messages=ASK, stream=stream, **extra
        )
    assert refused.value.code == "invalid_request_error"
    assert refused.value.param == field
    body = refused.value.body
    assert isinstance(body, dict)
    assert body["type"] == "invalid_request_error"
    assert str(body["message"]).startswith(f"{field}: ")
    assert model.requests == []  # refused before any turn


async def test_a_wrongly_typed_shape_field_is_a_400_naming_it(client: AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(
            model="aptix-general", messages=ASK, extra_body={"logprobs": "yes"}
        )
    assert refused.value.param == "logprobs"


async def test_the_values_that_ask_for_the_usual_answer_are_accepted(
    client: AsyncOpenAI, model: ScriptedModel
) -> None:
    model.add(reply("hi"))
    completion = await client.chat.completions.create(
        model="aptix-general",
        messages=ASK,
        functions=[],
        function_call="auto",
        parallel_tool_calls=True,
        modalities=["text"],
        logprobs=False,
        top_logprobs=0,
    )
    assert completion.choices[0].message.content == "hi"


async def test_fields_that_are_harmless_to_ignore_are_still_accepted(
    client: AsyncOpenAI, model: ScriptedModel
) -> None:
    model.add(reply("hi"))
    completion = await client.chat.completions.create(
        model="aptix-general",
        messages=ASK,
        temperature=0.2,
        top_p=0.9,
        seed=7,
        max_tokens=50,
        max_completion_tokens=50,
        stop=["\n\n"],
        presence_penalty=0.1,
        frequency_penalty=0.1,
        logit_bias={"50256": -100},
        user="someone",
        safety_identifier="someone",
        prompt_cache_key="k",
        metadata={"a": "b"},
        store=False,
        service_tier="auto",
        reasoning_effort="low",
        verbosity="low",
        prediction={"type": "content", "content": "hi"},
    )
    assert completion.choices[0].message.content == "hi"


def test_the_docs_list_every_refused_field() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "openai-compatible.md").read_text()
    for field, _, _ in SHAPE_FIELDS:
        assert f"`{field}`" in docs, field
