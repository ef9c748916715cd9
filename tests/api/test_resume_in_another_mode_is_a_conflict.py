"""``toolResults`` beside another ``mode`` than the waiting turn's: 409, as the session's state.

The body is valid; what refuses it is the session's state (a turn waiting in its mode), as
for an instruction sent while calls are pending. Both are 409 ``conflict``, never the 422 a
schema-valid request must not get.
"""

from __future__ import annotations

import httpx

from aptix.testing import ScriptedModel, call, reply

REFUSED = (
    "toolResults resume the waiting turn in its mode 'general'; 'mode' changes only with an "
    "instruction: send 'calculation' with the next one."
)


async def _waiting(client: httpx.AsyncClient, model: ScriptedModel) -> tuple[str, str]:
    """A session whose turn waits for the client's answer to one call."""
    session = (await client.post("/v1/sessions", json={})).json()["sessionId"]
    model.add(reply(None, call("request_user_approval", {"prompt": "OK?"}, id="u1")))
    waiting = await client.post(
        "/v1/agent/execute", json={"sessionId": session, "instruction": "ask me"}
    )
    assert waiting.json()["kind"] == "tool-only", waiting.text
    return str(session), str(waiting.json()["toolCalls"][0]["callId"])


async def test_tool_results_in_another_mode_conflict_as_an_instruction_while_pending_does(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    session, call_id = await _waiting(client, model)
    instruction = await client.post(
        "/v1/agent/execute", json={"sessionId": session, "instruction": "something else"}
    )
    results = [{"callId": call_id, "result": "yes"}]
    for stream in (False, True):
        resumed = await client.post(
            "/v1/agent/execute",
            json={
                "sessionId": session,
                "mode": "calculation",
                "toolResults": results,
                "stream": stream,
            },
        )
        assert (resumed.status_code, instruction.status_code) == (409, 409), resumed.text
        assert resumed.json()["error"] == {"code": "conflict", "message": REFUSED}
    shown = (await client.get(f"/v1/sessions/{session}")).json()
    assert (shown["mode"], shown["turns"][-1]["status"]) == ("general", "pending")


async def test_the_openapi_document_declares_that_conflict(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    responses = document["paths"]["/v1/agent/execute"]["post"]["responses"]
    assert "mode" in responses["409"]["description"]
