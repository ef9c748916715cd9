"""Every route's happy path and its bad-input answers, in-process over ASGI."""

from __future__ import annotations

import json

import httpx
import pytest

from aptix.testing import ScriptedModel, call, reply
from tests.api.conftest import B


async def _session(client: httpx.AsyncClient, **body: object) -> str:
    response = await client.post("/v1/sessions", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["sessionId"])


def _error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message"}
    return str(body["error"]["message"])


async def test_healthz_and_metrics(client: httpx.AsyncClient) -> None:
    health = await client.get("/healthz")
    assert health.json()["status"] == "ok"
    assert health.headers["x-request-id"]
    echoed = await client.get("/healthz", headers={"X-Request-ID": "req-42"})
    assert echoed.headers["x-request-id"] == "req-42"
    metrics = await client.get("/metrics")
    assert 'aptix_http_requests_total{method="GET",route="/healthz",status="200"} 2.0' in (
        metrics.text
    )


async def test_tools_list_and_invoke(client: httpx.AsyncClient) -> None:
    tools = {t["name"]: t for t in (await client.get("/v1/tools")).json()}
    assert tools["request_user_approval"]["serverFinal"] is False
    assert tools["agent_calculator"]["schema"]["parameters"]["required"] == ["expression"]
    ok = await client.post(
        "/v1/tools/agent_calculator/invoke", json={"arguments": {"expression": "2*(3+4)"}}
    )
    assert ok.json()["successful"] is True
    assert ok.json()["result"]["result"] == 14
    as_text = await client.post(
        "/v1/tools/agent_calculator/invoke", json={"arguments": '{"expression": "1+1"}'}
    )
    assert as_text.json()["result"]["result"] == 2
    failed = await client.post(
        "/v1/tools/agent_calculator/invoke", json={"arguments": {"expression": "1/0"}}
    )
    assert failed.status_code == 200
    assert failed.json() == {
        "successful": False,
        "result": None,
        "errors": [{"message": "Division by zero is not defined."}],
    }


async def test_invoke_bad_inputs_answer_4xx(client: httpx.AsyncClient) -> None:
    assert "Unknown tool 'nope'" in _error(await client.post("/v1/tools/nope/invoke", json={}), 404)
    malformed = await client.post(
        "/v1/tools/agent_calculator/invoke",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert _error(malformed, 422) == "The request body is not valid JSON."
    wrong_type = await client.post("/v1/tools/agent_calculator/invoke", json={"arguments": 5})
    assert "arguments" in _error(wrong_type, 422)
    extra = await client.post("/v1/tools/agent_calculator/invoke", json={"argumnts": {}})
    assert "argumnts" in _error(extra, 422)
    huge = await client.post(
        "/v1/tools/agent_calculator/invoke", json={"arguments": {"expression": "1" * 20_000}}
    )
    assert "larger than 10000 bytes" in _error(huge, 413)
    foreign = await client.post(
        "/v1/tools/agent_hello_world/invoke", json={"arguments": {}, "sessionId": "f" * 32}
    )
    _error(foreign, 404)
    assert "No such route" in _error(await client.get("/v1/nothing"), 404)


async def test_sessions_create_list_show(client: httpx.AsyncClient) -> None:
    session_id = await _session(client, mode="calculation", title="Budget")
    listed = (await client.get("/v1/sessions")).json()
    assert [s["sessionId"] for s in listed] == [session_id]
    change = {"mode": "general", "branch": True, "reason": "back"}
    await client.post(
        "/v1/tools/agent_change_mode/invoke", json={"arguments": change, "sessionId": session_id}
    )
    shown = (await client.get(f"/v1/sessions/{session_id}")).json()
    assert shown["mode"] == "general"
    assert shown["title"] == "Budget"
    assert shown["modeHistory"][0]["previousMode"] == "calculation"
    assert len(shown["childSessionIds"]) == 1
    assert shown["turns"] == []
    assert "Unknown mode 'x'" in _error(await client.post("/v1/sessions", json={"mode": "x"}), 422)
    _error(await client.get("/v1/sessions/" + "0" * 32), 404)
    _error(await client.get("/v1/sessions?limit=0"), 422)


async def test_modes_and_workflows(client: httpx.AsyncClient) -> None:
    modes = (await client.get("/v1/modes")).json()
    assert modes[0]["key"] == "general"
    assert "agent_change_mode" in modes[0]["offeredTools"]
    listed = (await client.get("/v1/workflows")).json()["workflows"]
    assert "author_workflow" in {w["workflowId"] for w in listed}
    manifest = (await client.get("/v1/workflows/author_workflow")).json()
    assert manifest["workflow"]["workflowId"] == "author_workflow"
    assert _error(await client.get("/v1/workflows/xyz"), 404) == "Unknown workflow 'xyz'."
    matched = await client.post(
        "/v1/workflows/match",
        json={"userMessage": "I'd like to write a new workflow for onboarding"},
    )
    assert matched.json()["matches"][0]["workflowId"] == "author_workflow"
    _error(await client.post("/v1/workflows/match", json={"userMessage": ""}), 422)
    # Blank text is bad input (422), not a conflict with the server's state (409).
    for blank in (" \t\n ", "\u3000\u00a0"):
        reply = await client.post("/v1/workflows/match", json={"userMessage": blank})
        message = _error(reply, 422)
        assert "userMessage" in message
        assert "blank" in message, message


async def test_cancel_workflow(client: httpx.AsyncClient) -> None:
    session_id = await _session(client)
    assert "no active workflow" in _error(
        await client.post(f"/v1/sessions/{session_id}/workflow/cancel"), 409
    )
    start = {"operation": "start_workflow", "workflowId": "guided_calculation"}
    started = await client.post(
        "/v1/tools/agent_workflow_run/invoke", json={"arguments": start, "sessionId": session_id}
    )
    assert started.json()["successful"], started.text
    cancelled = await client.post(f"/v1/sessions/{session_id}/workflow/cancel")
    assert cancelled.json() == {"sessionId": session_id, "cancelled": "guided_calculation"}
    shown = (await client.get(f"/v1/sessions/{session_id}")).json()
    assert shown["activeWorkflowId"] is None


async def test_execute_without_a_model_answers_503_naming_the_settings(
    no_model_client: httpx.AsyncClient,
) -> None:
    message = _error(
        await no_model_client.post("/v1/agent/execute", json={"instruction": "hi"}), 503
    )
    assert "APTIX_LLM_MODEL" in message
    assert (await no_model_client.get("/v1/modes")).status_code == 200


async def test_execute_creates_a_session_and_runs_a_turn(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(reply(None, call("agent_calculator", {"expression": "6*7"})), reply("42"))
    body = (await client.post("/v1/agent/execute", json={"instruction": "6*7?"})).json()
    assert (body["kind"], body["text"], body["mode"]) == ("ok", "42", "general")
    assert body["usage"]["totalTokens"] == 30
    assert body["toolCalls"][0]["name"] == "agent_calculator"
    shown = (await client.get(f"/v1/sessions/{body['sessionId']}")).json()
    assert shown["turns"][0]["text"] == "42"


async def test_execute_hands_off_and_resumes(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(reply(None, call("request_user_approval", {"prompt": "Go?"}, id="u1")))
    first = (await client.post("/v1/agent/execute", json={"instruction": "do it"})).json()
    assert first["kind"] == "tool-only"
    assert first["toolCalls"][0]["requiresClientExecution"] is True
    model.add(reply("Done."))
    resume = {
        "sessionId": first["sessionId"],
        "toolResults": [{"callId": "u1", "result": {"approved": True}}],
    }
    second = (await client.post("/v1/agent/execute", json=resume)).json()
    assert (second["kind"], second["text"]) == ("ok", "Done.")
    again = await client.post("/v1/agent/execute", json=resume)
    assert again.json() == second
    wrong = {"sessionId": first["sessionId"], "toolResults": [{"callId": "zzz", "result": 1}]}
    assert "zzz" in _error(await client.post("/v1/agent/execute", json=wrong), 409)


async def test_execute_bad_inputs(client: httpx.AsyncClient) -> None:
    _error(await client.post("/v1/agent/execute", json={}), 422)
    _error(await client.post("/v1/agent/execute", json={"instruction": 5}), 422)
    _error(
        await client.post("/v1/agent/execute", json={"instruction": "x", "sessionId": "0" * 32}),
        404,
    )
    _error(await client.post("/v1/agent/execute", json={"instruction": "x", "mode": "nope"}), 422)
    _error(await client.post("/v1/agent/execute", json={"toolResults": [{"callId": "a"}]}), 422)
    # Beside an existing session the mode switches it, so an unknown one is refused there too
    # (schemathesis' stateful run sent mode "" with a real sessionId and got 200).
    session = await _session(client)
    for mode in ("", "nope"):
        message = _error(
            await client.post(
                "/v1/agent/execute", json={"instruction": "x", "sessionId": session, "mode": mode}
            ),
            422,
        )
        assert f"Unknown mode '{mode}'" in message


async def test_sse_stream_of_a_turn_with_a_server_and_a_client_tool(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    model.add(
        reply(
            "Checking.",
            call("agent_calculator", {"expression": "1+1"}, id="s1"),
            call("request_user_approval", {"prompt": "OK?"}, id="u1"),
        )
    )
    events: list[tuple[str, dict[str, object]]] = []
    async with client.stream(
        "POST", "/v1/agent/execute", json={"instruction": "go", "stream": True}
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        kind = ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                events.append((kind, json.loads(line.removeprefix("data: "))))
    assert [k for k, _ in events] == [
        "text_delta",
        "text",
        "tool_call_started",
        "tool_call_started",
        "tool_call_finished",
        "tool_call_finished",
        "client_calls_pending",
        "turn_finished",
    ]
    final = events[-1][1]
    assert final["kind"] == "tool-only"
    pending = events[-2][1]["toolCalls"]
    assert [c["callId"] for c in pending] == ["u1"]  # type: ignore[index]


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic x"}]
)
async def test_auth_is_required_when_keys_are_configured(
    client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    del client.headers["Authorization"]
    _error(await client.get("/v1/sessions", headers=headers), 401)


async def test_another_org_sees_none_of_the_sessions(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    session_id = await _session(client)
    assert _error(await client.get(f"/v1/sessions/{session_id}", headers=B), 404)
    assert (await client.get("/v1/sessions", headers=B)).json() == []
    assert _error(await client.post(f"/v1/sessions/{session_id}/workflow/cancel", headers=B), 404)
    _error(
        await client.post(
            "/v1/tools/agent_hello_world/invoke",
            json={"arguments": {"name": "x"}, "sessionId": session_id},
            headers=B,
        ),
        404,
    )
    _error(
        await client.post(
            "/v1/agent/execute", json={"sessionId": session_id, "instruction": "hi"}, headers=B
        ),
        404,
    )
    assert model.requests == []


@pytest.mark.parametrize("arguments", [[1, 2], 5, True])
async def test_invoke_arguments_that_are_no_object_are_refused_in_json_words(
    client: httpx.AsyncClient, arguments: object
) -> None:
    refused = await client.post("/v1/tools/agent_hello_world/invoke", json={"arguments": arguments})
    assert _error(refused, 422) == (
        "Invalid request: arguments: must be a JSON object (or its text)."
    )


async def test_invoke_with_null_arguments_is_a_call_with_none(client: httpx.AsyncClient) -> None:
    done = await client.post("/v1/tools/agent_list_modes/invoke", json={"arguments": None})
    assert done.status_code == 200, done.text
    assert done.json()["successful"] is True
