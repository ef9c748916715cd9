"""OpenAI APIs Aptix does not serve answer an OpenAI 404 that points to Chat Completions.

The Vercel AI SDK's default provider and the OpenAI Agents SDK call the Responses API first;
their users read the 404 and must learn from it where Aptix answers (review r3 F1, round 71).
"""

from __future__ import annotations

import httpx
import openai
import pytest
from openai import AsyncOpenAI

SERVED = "/v1/chat/completions"


def _openai_404(response: httpx.Response) -> str:
    assert response.status_code == 404, response.text
    error = response.json()["error"]
    assert error["type"] == "not_found_error"
    assert error["code"] == "not_found"
    assert error["param"] is None
    assert SERVED in error["message"]
    return str(error["message"])


async def test_the_responses_api_is_refused_with_the_route_aptix_serves(
    openai_client: AsyncOpenAI,
) -> None:
    with pytest.raises(openai.NotFoundError) as refused:
        await openai_client.responses.create(model="aptix-general", input="hello")
    assert refused.value.code == "not_found"
    assert "Responses API" in refused.value.message
    assert SERVED in refused.value.message
    body = refused.value.body
    assert isinstance(body, dict)
    assert body["type"] == "not_found_error"
    assert body["param"] is None


@pytest.mark.parametrize(
    ("method", "path", "named"),
    [
        ("POST", "/v1/responses", "Responses API"),
        ("GET", "/v1/responses/resp_123", "Responses API"),
        ("POST", "/v1/responses/resp_123/cancel", "Responses API"),
        ("GET", "/v1/responses/resp_123/input_items", "Responses API"),
        ("POST", "/v1/responses/", "Responses API"),
        ("POST", "/v1/completions", "Completions API"),
        ("POST", "/v1/embeddings", "embeddings"),
        ("GET", "/v1/chat/completions/chatcmpl-1", "stored chat completions"),
        ("POST", "/v1/assistants", "Assistants API"),
    ],
)
async def test_openai_apis_aptix_does_not_serve_say_where_it_answers(
    client: httpx.AsyncClient, method: str, path: str, named: str
) -> None:
    response = await client.request(method, path, json={"model": "aptix-general"})
    assert named in _openai_404(response)


async def test_the_sdk_embeddings_and_completions_calls_are_told_the_same(
    openai_client: AsyncOpenAI,
) -> None:
    with pytest.raises(openai.NotFoundError) as embeddings:
        await openai_client.embeddings.create(model="aptix-general", input="hello")
    assert SERVED in embeddings.value.message
    with pytest.raises(openai.NotFoundError) as completions:
        await openai_client.completions.create(model="aptix-general", prompt="hello")
    assert SERVED in completions.value.message


async def test_a_body_over_the_limit_there_is_refused_in_the_openai_shape(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post("/v1/responses", json={"input": "x" * 20_000})
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    "path", ["/v1/nothing", "/v1/responsesx", "/v2/responses", "/responses", "/v1/chat/other"]
)
async def test_other_unknown_paths_keep_the_plain_answer(
    client: httpx.AsyncClient, path: str
) -> None:
    response = await client.post(path, json={})
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "not_found", "message": "No such route."}}
