"""A running turn reads its session's mode and active workflow again as it goes (DESIGN §6, §15).

A workflow started, or a mode changed, on another surface while a turn runs governs the rest
of that turn: the tools offered to its next model call, the executor's guard on its next
tool batch, and the mode its answer reports.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from aptix.api import create_app
from aptix.llm.types import LlmRequest, LlmResponse
from aptix.runtime import Runtime
from aptix.testing import FunctionModel, call, reply
from tests.api.conftest import A


class Paused:
    """A model whose first answer waits until the test has changed the session."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.go = asyncio.Event()

    async def __call__(self, request: LlmRequest) -> LlmResponse:
        if not any(m["role"] == "tool" for m in request.messages):
            self.asked.set()
            await self.go.wait()
            return reply(None, call("agent_hello_world", {"name": "z"}, id="h1"))
        return reply("done")


@pytest.fixture
def paused() -> Paused:
    return Paused()


@pytest.fixture
def model(paused: Paused) -> FunctionModel:
    return FunctionModel(paused)


@pytest.fixture
async def http(keyed_runtime: Runtime, model: FunctionModel) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(runtime=keyed_runtime, model=model)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test", headers=A) as c:
        yield c


async def _turn_changed_meanwhile(
    http: httpx.AsyncClient, paused: Paused, tool: str, arguments: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """Run a turn; while its model call is under way, invoke ``tool`` on its session."""
    session_id = (await http.post("/v1/sessions", json={})).json()["sessionId"]
    turn = asyncio.create_task(
        http.post("/v1/agent/execute", json={"sessionId": session_id, "instruction": "go"})
    )
    await asyncio.wait_for(paused.asked.wait(), 30)
    changed = await http.post(
        f"/v1/tools/{tool}/invoke", json={"sessionId": session_id, "arguments": arguments}
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["successful"], changed.text
    paused.go.set()
    answered = await asyncio.wait_for(turn, 30)
    assert answered.status_code == 200, answered.text
    return session_id, answered.json()


def _offered(request: LlmRequest) -> set[str]:
    return {t["function"]["name"] if "function" in t else t["name"] for t in request.tools}


async def test_a_workflow_started_meanwhile_guards_the_rest_of_the_turn(
    http: httpx.AsyncClient, paused: Paused, model: FunctionModel
) -> None:
    start = {"operation": "start_workflow", "workflowId": "guided_calculation"}
    session_id, answer = await _turn_changed_meanwhile(http, paused, "agent_workflow_run", start)
    [refused] = answer["toolCalls"]
    assert (refused["name"], refused["outcome"], refused["wasExecuted"]) == (
        "agent_hello_world",
        "failed",
        False,
    )
    assert "guided_calculation" in refused["errorMessage"]
    told = json.loads(model.requests[-1].messages[-1]["content"])
    assert "guided_calculation" in told["error"]
    first, second = (_offered(r) for r in model.requests)
    assert "agent_hello_world" in first
    assert "agent_hello_world" not in second
    assert "agent_calculator" in second
    stored = (await http.get(f"/v1/sessions/{session_id}")).json()
    assert stored["activeWorkflowId"] == "guided_calculation"


async def test_a_mode_changed_meanwhile_governs_the_rest_of_the_turn(
    http: httpx.AsyncClient, paused: Paused, model: FunctionModel
) -> None:
    change = {"mode": "calculation", "reason": "changed elsewhere", "branch": False}
    session_id, answer = await _turn_changed_meanwhile(http, paused, "agent_change_mode", change)
    [refused] = answer["toolCalls"]
    assert (refused["name"], refused["outcome"], refused["wasExecuted"]) == (
        "agent_hello_world",
        "failed",
        False,
    )
    assert "agent_hello_world" not in _offered(model.requests[-1])
    assert answer["mode"] == "calculation"
    assert (await http.get(f"/v1/sessions/{session_id}")).json()["mode"] == "calculation"
