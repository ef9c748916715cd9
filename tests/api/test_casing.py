"""DESIGN §2: request bodies are read in camelCase or PascalCase, as the OpenAPI says."""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema
import pytest

from aptix.testing import ScriptedModel, call, reply


def _schema(document: dict[str, Any], name: str) -> jsonschema.Draft202012Validator:
    root = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    return jsonschema.Draft202012Validator(root)


async def test_pascal_case_bodies_are_accepted_on_every_route(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    created = await client.post("/v1/sessions", json={"Mode": "calculation", "Title": "T"})
    assert created.status_code == 201, created.text
    session_id = created.json()["sessionId"]
    shown = (await client.get(f"/v1/sessions/{session_id}")).json()
    assert (shown["mode"], shown["title"]) == ("calculation", "T")

    invoked = await client.post(
        "/v1/tools/agent_change_mode/invoke",
        json={
            "SessionId": session_id,
            "Arguments": {"Mode": "general", "Branch": False, "Reason": "back"},
        },
    )
    assert invoked.status_code == 200, invoked.text
    assert invoked.json()["result"]["mode"] == "general"

    model.add(reply(None, call("request_user_approval", {"prompt": "Go?"}, id="u1")))
    handed = await client.post(
        "/v1/agent/execute", json={"SessionId": session_id, "Instruction": "ask me"}
    )
    assert handed.status_code == 200, handed.text
    assert handed.json()["kind"] == "tool-only"
    model.add(reply("done"))
    resumed = await client.post(
        "/v1/agent/execute",
        json={"SessionId": session_id, "ToolResults": [{"CallId": "u1", "Result": "yes"}]},
    )
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["text"] == "done"

    matched = await client.post(
        "/v1/workflows/match", json={"UserMessage": "I'd like to write a new workflow"}
    )
    assert matched.status_code == 200, matched.text
    assert matched.json()["matches"][0]["workflowId"] == "author_workflow"


@pytest.mark.parametrize(
    ("path", "name", "body"),
    [
        ("/v1/sessions", "SessionCreate", {"Mode": "general", "Title": "t"}),
        ("/v1/workflows/match", "MatchRequest", {"UserMessage": "hello"}),
        ("/v1/agent/execute", "ExecuteRequest", {"Instruction": "hi", "Stream": False}),
        ("/v1/tools/agent_list_modes/invoke", "InvokeRequest", {"Arguments": {}}),
    ],
)
async def test_the_document_accepts_what_the_server_accepts(
    client: httpx.AsyncClient,
    model: ScriptedModel,
    path: str,
    name: str,
    body: dict[str, Any],
) -> None:
    document = (await client.get("/openapi.json")).json()
    schema = _schema(document, name)
    model.add(reply("ok"))
    model.add(reply("ok"))
    camel = {key[0].lower() + key[1:]: value for key, value in body.items()}
    mixed = dict(list(camel.items())[:1] + list(body.items())[1:]) if len(body) > 1 else None
    snake = {"session_id" if name == "InvokeRequest" else "user_message": "x", **camel}
    for accepted in (camel, body):
        assert schema.is_valid(accepted), accepted
        answered = await client.post(path, json=accepted)
        assert answered.status_code < 300, answered.text
    for refused in (snake, mixed):
        if refused is None:
            continue
        assert not schema.is_valid(refused), refused
        answered = await client.post(path, json=refused)
        assert answered.status_code == 422, answered.text


async def test_a_body_mixing_the_casings_is_told_so(client: httpx.AsyncClient) -> None:
    answered = await client.post("/v1/sessions", json={"mode": "general", "Title": "t"})
    assert answered.status_code == 422
    message = answered.json()["error"]["message"]
    assert "one casing per object" in message
    assert "'mode'" in message
    assert "'Title'" in message


@pytest.mark.parametrize(
    ("path", "body"),
    [
        # Found by schemathesis (ST201): a number where the schema says boolean was coerced.
        ("/v1/agent/execute", {"Instruction": "0", "Stream": 0.0, "Mode": "general"}),
        ("/v1/agent/execute", {"instruction": "hi", "stream": 1}),
        ("/v1/agent/execute", {"instruction": "hi", "stream": "true"}),
        ("/v1/sessions", {"mode": 5}),
        ("/v1/workflows/match", {"userMessage": 12}),
    ],
)
async def test_a_value_of_another_json_type_is_refused_not_coerced(
    client: httpx.AsyncClient, path: str, body: dict[str, Any]
) -> None:
    document = (await client.get("/openapi.json")).json()
    name = {"/v1/agent/execute": "ExecuteRequest", "/v1/sessions": "SessionCreate"}.get(
        path, "MatchRequest"
    )
    assert not _schema(document, name).is_valid(body)
    answered = await client.post(path, json=body)
    assert answered.status_code == 422, answered.text
    assert answered.json()["error"]["message"]


@pytest.mark.parametrize("body", [{"arguments": None}, {"Arguments": None}])
async def test_null_invoke_arguments_are_documented_as_they_are_accepted(
    client: httpx.AsyncClient, body: dict[str, Any]
) -> None:
    # Schemathesis found the route taking a null the schema called invalid (ST201).
    document = (await client.get("/openapi.json")).json()
    assert _schema(document, "InvokeRequest").is_valid(body)
    answered = await client.post("/v1/tools/agent_list_modes/invoke", json=body)
    assert answered.status_code == 200, answered.text
