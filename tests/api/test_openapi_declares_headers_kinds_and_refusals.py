"""``/openapi.json`` declares what the server always answers: its headers, every ``kind``, and
the keyless mode's 421 (foreign ``Host``) and 403 (foreign ``Origin``).

A client generated from the document reads ``ETag``, ``X-Aptix-Session``, ``Retry-After`` and
the ``RateLimit`` headers in a typed way only if they are declared where they are sent.
"""

from __future__ import annotations

from typing import Any

import httpx
from openapi_spec_validator import validate

from aptix.testing import ScriptedModel, reply

AUTHORING = "/v1/tools/agent_workflow_authoring/invoke"


def _operations(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{method.upper()} {path}", operation)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    ]


def _headers(document: dict[str, Any], path: str, method: str, status: int) -> set[str]:
    answer = document["paths"][path][method]["responses"][str(status)]
    return set(answer.get("headers", {}))


async def test_every_429_and_503_declares_when_to_retry(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    validate(document)
    for name, operation in _operations(document):
        responses = operation["responses"]
        assert {"Retry-After", "RateLimit", "RateLimit-Policy"} <= set(
            responses["429"].get("headers", {})
        ), name
        assert "Retry-After" in responses["503"].get("headers", {}), name
    # A busy session's 409 on the OpenAI route says when to try again too.
    assert "Retry-After" in _headers(document, "/v1/chat/completions", "post", 409)


async def test_x_aptix_session_is_declared_on_every_answer_that_carries_it(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    document = (await client.get("/openapi.json")).json()
    for status in (200, 400, 409, 422, 429, 502, 503):
        assert "X-Aptix-Session" in _headers(document, "/v1/chat/completions", "post", status)
    model.add(reply("Hi."))
    answered = await client.post(
        "/v1/chat/completions",
        json={"model": "aptix-general", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert answered.status_code == 200, answered.text
    assert answered.headers["X-Aptix-Session"]


async def test_the_authoring_etag_is_declared_where_it_is_sent(
    no_model_client: httpx.AsyncClient,
) -> None:
    client = no_model_client
    document = (await client.get("/openapi.json")).json()
    arguments = {"operation": "draft_workflow", "workflowId": "tagged", "title": "T"}
    drafted = await client.post(AUTHORING, json={"arguments": {**arguments, "description": "D."}})
    assert drafted.headers["ETag"] == '"1"'
    update = {"operation": "update_workflow", "workflowId": "tagged", "fields": {"title": "N"}}
    stale = await client.post(AUTHORING, json={"arguments": update}, headers={"If-Match": '"9"'})
    assert (stale.status_code, stale.headers["ETag"]) == (412, '"1"')
    for status in (200, 409, 412):
        assert "ETag" in _headers(document, "/v1/tools/{name}/invoke", "post", status), status


async def test_kind_lists_every_kind_the_server_answers(client: httpx.AsyncClient) -> None:
    schemas = (await client.get("/openapi.json")).json()["components"]["schemas"]
    kind = schemas["TurnResultBody"]["properties"]["kind"]
    assert kind["enum"] == ["ok", "tool-only", "empty", "error", "cancelled"]


async def test_keyless_mode_declares_421_and_403_on_every_operation(
    no_model_client: httpx.AsyncClient,
) -> None:
    client = no_model_client
    document = (await client.get("/openapi.json")).json()
    validate(document)
    for name, operation in _operations(document):
        for status, code in (("421", "misdirected_request"), ("403", "forbidden")):
            answer = operation["responses"].get(status)
            assert answer is not None, (name, status)
            assert answer["content"]["application/json"]["schema"] == {
                "$ref": "#/components/schemas/ErrorBody"
            }
            assert code in answer["description"], (name, status)
    # What the document says is what the server does.
    foreign_host = await client.get("/v1/sessions", headers={"Host": "evil.example"})
    foreign_origin = await client.get("/v1/sessions", headers={"Origin": "https://evil.example"})
    assert (foreign_host.status_code, foreign_origin.status_code) == (421, 403)


async def test_with_keys_there_is_no_421(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    for name, operation in _operations(document):
        assert "421" not in operation["responses"], name
