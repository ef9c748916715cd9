"""docs/http-api.md's "Resuming a turn": the fields it lists and the bodies it posts work.

The shape of a ``toolResults`` entry was written nowhere, and the natural guess
(``resultJson``, as the answers name it) is 422.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx

from aptix.api.schemas import ToolResultBody

DOC = Path(__file__).resolve().parents[2] / "docs" / "http-api.md"
SECTION = DOC.read_text(encoding="utf-8").split("\n## Resuming a turn\n", 1)[1].split("\n## ", 1)[0]


def _documented_bodies() -> list[str]:
    return re.findall(r"-d '(\{.*?\})'\n", SECTION)


async def _waiting_for_approval(demo_client: httpx.AsyncClient) -> tuple[str, str]:
    asked = await demo_client.post("/v1/agent/execute", json={"instruction": "ask me for approval"})
    body = asked.json()
    assert body["kind"] == "tool-only", body
    [call] = body["toolCalls"]
    assert call["outcome"] == "pending"
    return body["sessionId"], call["callId"]


async def _post_documented(demo_client: httpx.AsyncClient, template: str) -> dict[str, Any]:
    session_id, call_id = await _waiting_for_approval(demo_client)
    text = template.replace("<id>", session_id).replace("<callId>", call_id)
    answered = await demo_client.post(
        "/v1/agent/execute", content=text, headers={"content-type": "application/json"}
    )
    assert answered.status_code == 200, answered.text
    stored = (await demo_client.get(f"/v1/sessions/{session_id}")).json()["turns"][-1]
    return {"answer": answered.json(), "call": stored["toolCalls"][0]}


def test_the_documented_fields_are_the_wire_fields() -> None:
    table = re.findall(r"^\| `(\w+)` \|", SECTION, re.MULTILINE)
    wire = {field.alias or name for name, field in ToolResultBody.model_fields.items()}
    assert set(table) == wire == {"callId", "result", "isError"}


async def test_the_documented_approval_resumes_the_demo_turn(
    demo_client: httpx.AsyncClient,
) -> None:
    approve, _ = _documented_bodies()
    done = await _post_documented(demo_client, approve)
    assert done["answer"]["kind"] == "ok"
    assert done["answer"]["text"] == "(demo model) You approved."
    assert done["call"]["outcome"] == "succeeded"
    assert json.loads(done["call"]["clientResult"]) == {"approved": True}


async def test_the_documented_client_failure_fails_the_call(demo_client: httpx.AsyncClient) -> None:
    _, failed = _documented_bodies()
    done = await _post_documented(demo_client, failed)
    assert done["answer"]["kind"] == "ok"
    assert done["call"]["outcome"] == "failed"


async def test_the_guessed_result_json_field_is_refused(demo_client: httpx.AsyncClient) -> None:
    session_id, call_id = await _waiting_for_approval(demo_client)
    guessed = {"callId": call_id, "resultJson": '{"approved": true}'}
    refused = await demo_client.post(
        "/v1/agent/execute", json={"sessionId": session_id, "toolResults": [guessed]}
    )
    assert refused.status_code == 422
    assert "toolResults.0.resultJson" in refused.json()["error"]["message"]
