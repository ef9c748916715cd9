"""A method Aptix does not serve on an OpenAI path: 405 with ``Allow``, saying what is served.

The openai SDK's ``chat.completions.list()`` (stored chat completions) is ``GET
/v1/chat/completions`` and ``models.delete()`` is ``DELETE /v1/models/{model}``; both read
Starlette's bare "Method Not Allowed" (review s2 F2, round 72). The status stays 405, as RFC
9110 has it for a path served with other methods, and as the OpenAPI document implies.
"""

from __future__ import annotations

import httpx
import openai
import pytest
from openai import AsyncOpenAI

SERVED = (
    "It serves the OpenAI Chat Completions API: POST /v1/chat/completions, with its models "
    "at GET /v1/models."
)


def _refusal(answer: httpx.Response, allow: str) -> str:
    assert answer.status_code == 405, answer.text
    assert answer.headers["allow"] == allow
    error = answer.json()["error"]
    assert (error["code"], error["type"], error["param"]) == (
        "method_not_allowed",
        "invalid_request_error",
        None,
    )
    assert error["message"].endswith(SERVED)
    return str(error["message"])


async def test_listing_stored_chat_completions_is_told_they_are_not_served(
    openai_client: AsyncOpenAI,
) -> None:
    with pytest.raises(openai.APIStatusError) as refused:
        await openai_client.chat.completions.list()
    message = _refusal(refused.value.response, "POST")
    assert message.startswith("Aptix does not serve stored chat completions.")
    assert message in refused.value.message
    assert refused.value.code == "method_not_allowed"


async def test_deleting_a_model_is_told_it_is_not_served(openai_client: AsyncOpenAI) -> None:
    with pytest.raises(openai.APIStatusError) as refused:
        await openai_client.models.delete("aptix-general")
    message = _refusal(refused.value.response, "GET, HEAD")
    assert message.startswith("Aptix does not serve model deletion.")


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("PUT", "/v1/chat/completions", "POST"),
        ("DELETE", "/v1/chat/completions", "POST"),
        ("POST", "/v1/models", "GET, HEAD"),
        ("PATCH", "/v1/models/aptix-general", "GET, HEAD"),
    ],
)
async def test_other_methods_on_the_openai_paths_are_told_what_is_served(
    client: httpx.AsyncClient, method: str, path: str, allow: str
) -> None:
    message = _refusal(await client.request(method, path), allow)
    assert message.startswith(f"Aptix does not serve {method} requests at this path.")


async def test_head_is_answered_as_get_and_other_paths_keep_the_plain_405(
    client: httpx.AsyncClient,
) -> None:
    head = await client.head("/v1/chat/completions")
    assert (head.status_code, head.headers["allow"], head.content) == (405, "POST", b"")
    plain = await client.delete("/v1/sessions")
    assert plain.status_code == 405
    assert plain.json() == {
        "error": {"code": "method_not_allowed", "message": "Method Not Allowed"}
    }
