"""``POST /v1/agent/execute`` with a ``sessionId`` and a ``mode``: the session switches to it."""

from __future__ import annotations

from typing import Any

import httpx

from aptix.testing import ScriptedModel, call, reply


async def _session(client: httpx.AsyncClient) -> str:
    created = await client.post("/v1/sessions", json={})
    assert created.status_code == 201, created.text
    assert created.json()["mode"] == "general"
    return str(created.json()["sessionId"])


async def _shown(client: httpx.AsyncClient, session: str) -> dict[str, Any]:
    shown: dict[str, Any] = (await client.get(f"/v1/sessions/{session}")).json()
    return shown


def _history(shown: dict[str, Any]) -> list[tuple[str | None, str, str]]:
    return [(c["previousMode"], c["mode"], c["reason"]) for c in shown["modeHistory"]]


async def test_a_mode_beside_a_session_switches_it_before_the_turn_runs(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    session = await _session(client)
    model.add(reply("42"))
    answer = await client.post(
        "/v1/agent/execute",
        json={"sessionId": session, "mode": "calculation", "instruction": "6*7"},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["mode"] == "calculation"
    # The turn ran in the mode asked for: the model was offered that mode's tools.
    assert "agent_calculator" in model.offered_tools(0)
    shown = await _shown(client, session)
    assert shown["mode"] == "calculation"
    reason = "Mode calculation picked by the client with the instruction."
    assert _history(shown) == [("general", "calculation", reason)]
    # The mode the session is already in changes nothing, streamed or not.
    model.add(reply("ok"))
    streamed = await client.post(
        "/v1/agent/execute",
        json={"sessionId": session, "mode": "calculation", "instruction": "again", "stream": True},
    )
    assert streamed.status_code == 200
    assert '"mode": "calculation"' in streamed.text
    assert _history(await _shown(client, session)) == [("general", "calculation", reason)]


async def test_a_streamed_turn_switches_the_mode_too(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    session = await _session(client)
    model.add(reply("hi"))
    streamed = await client.post(
        "/v1/agent/execute",
        json={"sessionId": session, "mode": "calculation", "instruction": "hi", "stream": True},
    )
    assert streamed.status_code == 200, streamed.text
    assert (await _shown(client, session))["mode"] == "calculation"


async def test_tool_results_with_another_mode_are_refused_and_change_nothing(
    client: httpx.AsyncClient, model: ScriptedModel
) -> None:
    session = await _session(client)
    model.add(reply(None, call("request_user_approval", {"prompt": "OK?"}, id="u1")))
    waiting = await client.post(
        "/v1/agent/execute", json={"sessionId": session, "instruction": "ask me"}
    )
    assert waiting.json()["kind"] == "tool-only", waiting.text
    results = [{"callId": waiting.json()["toolCalls"][0]["callId"], "result": "yes"}]
    refused = await client.post(
        "/v1/agent/execute",
        json={"sessionId": session, "mode": "calculation", "toolResults": results},
    )
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["message"] == (
        "toolResults resume the waiting turn in its mode 'general'; 'mode' changes only with "
        "an instruction: send 'calculation' with the next one."
    )
    shown = await _shown(client, session)
    assert (shown["mode"], shown["modeHistory"]) == ("general", [])
    assert shown["turns"][-1]["status"] == "pending"
    # The waiting turn's own mode is fine beside its results.
    model.add(reply("done"))
    resumed = await client.post(
        "/v1/agent/execute",
        json={"sessionId": session, "mode": "general", "toolResults": results},
    )
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["kind"] == "ok"
    model.assert_complete()
