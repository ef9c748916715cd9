"""The OpenAPI document tells the truth: envelope schemas, ids, security, Location, SSE."""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema
from openapi_spec_validator import validate

from aptix.testing import ScriptedModel, reply


async def test_the_document_is_valid_and_documents_the_envelope(
    client: httpx.AsyncClient,
) -> None:
    document = (await client.get("/openapi.json")).json()
    validate(document)
    assert "HTTPValidationError" not in str(document)
    operations = [op for ops in document["paths"].values() for op in ops.values()]
    ids = [op["operationId"] for op in operations]
    assert len(set(ids)) == len(ids)
    assert {"invokeTool", "createSession", "execute", "listSessions"} <= set(ids)
    for op in operations:
        for status in ("400", "401", "404", "409", "413", "422", "503"):
            schema = op["responses"][status]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (op, status)
    error = document["components"]["schemas"]["ErrorBody"]
    assert error["required"] == ["error"]
    execute = document["paths"]["/v1/agent/execute"]["post"]
    assert set(execute["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}
    assert "502" in execute["responses"]
    scheme = next(iter(document["components"]["securitySchemes"].values()))
    assert scheme["scheme"].lower() == "bearer"
    create = document["paths"]["/v1/sessions"]["post"]["responses"]["201"]
    assert "Location" in create["headers"]
    camel, pascal = document["components"]["schemas"]["SessionCreate"]["anyOf"]
    for mode in (camel["properties"]["mode"], pascal["properties"]["Mode"]):
        assert {"type": "string", "enum": ["general", "workflow_authoring", "calculation"]} in (
            mode["anyOf"]
        )


def _body_schema(document: dict[str, Any], name: str) -> jsonschema.Draft202012Validator:
    """A validator for one component, its references resolved in the whole document."""
    root = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    return jsonschema.Draft202012Validator(root)


async def test_creates_answer_with_location(client: httpx.AsyncClient) -> None:
    created = await client.post("/v1/sessions", json={})
    assert created.status_code == 201
    location = created.headers["location"]
    assert location == f"/v1/sessions/{created.json()['sessionId']}"
    assert (await client.get(location)).status_code == 200


async def test_schema_valid_execute_bodies_are_accepted_or_the_schema_refuses_them(
    client: httpx.AsyncClient,
) -> None:
    document = (await client.get("/openapi.json")).json()
    execute = _body_schema(document, "ExecuteRequest")
    # {} and a blank instruction are outside the schema now, as the route refuses them.
    for body in ({}, {"instruction": "  "}, {"toolResults": [{"callId": "c"}]}):
        assert not execute.is_valid(body), body
        assert (await client.post("/v1/agent/execute", json=body)).status_code == 422


async def test_blank_means_the_same_to_the_schema_and_the_server(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    # schemathesis sent "\x1e": ECMAScript's \S matched it, Python's strip() removed it (422).
    document = (await client.get("/openapi.json")).json()
    execute = _body_schema(document, "ExecuteRequest")
    for blank in ("\x1e", "\x1c\x1f", "\x85", "\ufeff", " \u2003\u3000 ", "\t\v"):
        body = {"instruction": blank}
        assert not execute.is_valid(body), repr(blank)
        assert (await client.post("/v1/agent/execute", json=body)).status_code == 422, repr(blank)
    model.add(reply("ok"))
    body = {"instruction": "\x1e hi \ufeff"}
    assert execute.is_valid(body)
    answered = await client.post("/v1/agent/execute", json=body)
    assert answered.status_code == 200, answered.text
    assert answered.json()["text"] == "ok"


async def test_405_lists_every_method_of_the_path(client: httpx.AsyncClient) -> None:
    literal = await client.request("OPTIONS", "/v1/workflows/match")
    assert literal.status_code == 405
    assert literal.headers["allow"] == "POST"
    templated = await client.delete("/v1/sessions/abc")
    assert templated.headers["allow"] == "GET, HEAD"


async def test_bearer_auth_is_stated_only_when_keys_are_configured(
    client: httpx.AsyncClient, no_model_client: httpx.AsyncClient
) -> None:
    keyed = (await client.get("/openapi.json")).json()
    keyless = (await no_model_client.get("/openapi.json")).json()
    validate(keyless)
    keyed_ops = [op for ops in keyed["paths"].values() for op in ops.values()]
    keyless_ops = [op for ops in keyless["paths"].values() for op in ops.values()]
    assert keyed["components"]["securitySchemes"]
    security = {op["operationId"]: op.get("security") for op in keyed_ops}
    assert security["createSession"] == security["execute"] == [{"ApiKey": []}]
    assert "securitySchemes" not in keyless["components"]
    assert not [op["operationId"] for op in keyless_ops if "security" in op]
    assert not [op["operationId"] for op in keyless_ops if "401" in op["responses"]]
    # What a keyless server really does: no key, no 401.
    assert (await no_model_client.get("/v1/sessions")).status_code == 200
