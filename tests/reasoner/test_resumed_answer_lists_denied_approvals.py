"""The answer of a resume lists every approval it answered: approved ones and denied ones.

Clients (``aptix.toolCalls`` on the OpenAI-compatible endpoint, ``toolCalls`` of
``POST /v1/agent/execute``) read each call's outcome there; a denied call is no exception.
"""

from __future__ import annotations

import pytest

from aptix.reasoner import ToolResultInput
from aptix.testing import ScriptedModel, call, reply
from tests.reasoner.conftest import Harness
from tests.reasoner.test_ledger_approved import Destroy


@pytest.fixture(autouse=True)
def _gated(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness.runtime.executor, "_guard", None)  # offered below, not by a mode
    harness.runtime.registry.register(Destroy)


async def _resume(harness: Harness, answer: str) -> list[tuple[str, str, bool]]:
    model = ScriptedModel()
    model.add(reply(None, call("destroy", {}, id="d1")), reply("As you wish."))
    reasoner = harness.runtime.reasoner(model)
    reasoner._offered = lambda _w, tools, _o: [*tools, "destroy"]
    ids = {"session_id": harness.session_id, "org": "acme", "user": "ann"}
    handed = await reasoner.execute(**ids, instruction="destroy it")
    assert [c["state"] for c in handed.tool_calls] == ["awaiting_approval"]
    resumed = await reasoner.execute(**ids, tool_results=[ToolResultInput("d1", answer)])
    assert resumed.text == "As you wish."
    return [(c["callId"], c["outcome"], c["wasExecuted"]) for c in resumed.tool_calls]


async def test_a_denied_approval_is_listed_with_its_outcome(harness: Harness) -> None:
    assert await _resume(harness, '{"approved": false}') == [("d1", "denied", False)]


async def test_an_approved_one_is_listed_as_before(harness: Harness) -> None:
    assert await _resume(harness, '{"approved": true}') == [("d1", "succeeded", True)]
