"""A client-final call the client answers with ``isError`` says why where failures are read.

Review r1 (round 66) F2: ``request_user_approval`` answered ``{"result": "closed dialog",
"isError": true}`` was recorded ``failed`` with ``errorMessage`` null, so the console's "Calls
that did not succeed" showed "—" for its error.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from aptix.api.routes.sessions import turn_to_json
from aptix.reasoner import ToolResultInput, call_states, ledger
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import ScriptedModel, call, reply

APPROVAL = {"prompt": "Go on?", "action": "go on"}


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = AptixSettings(data_dir=tmp_path, semantic_matching=False, load_plugins=False)
    async with open_runtime(settings) as rt:
        yield rt


async def _answered(runtime: Runtime, answer: str) -> dict[str, object]:
    created = await runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    sid = created.result.id
    model = ScriptedModel.of(
        reply(None, call("request_user_approval", APPROVAL, id="a1")), reply("Understood.")
    )
    reasoner = runtime.reasoner(model)
    asked = await reasoner.execute(session_id=sid, org="acme", user="ann", instruction="ask")
    assert asked.kind == "tool-only"
    done = await reasoner.execute(
        session_id=sid, org="acme", user="ann", tool_results=[ToolResultInput("a1", answer, True)]
    )
    assert done.text == "Understood."
    # The model reads the client's text as it is (documented), with no marker added.
    assert [m["content"] for m in model.requests[-1].messages if m["role"] == "tool"] == [answer]
    [turn] = await runtime.turns.list_turns(sid, "acme", limit=1)
    [shown] = turn_to_json(turn)["toolCalls"]
    assert turn.tool_calls[0]["errorMessage"] == shown["errorMessage"]  # stored, not derived
    return shown


async def test_the_clients_error_text_is_the_failed_calls_error_message(runtime: Runtime) -> None:
    shown = await _answered(runtime, "closed dialog")
    assert (shown["state"], shown["outcome"]) == ("failed", "failed")
    assert (shown["errorMessage"], shown["clientResult"]) == ("closed dialog", "closed dialog")


async def test_a_long_error_is_bounded_and_an_empty_one_still_says_the_client_failed_it(
    runtime: Runtime,
) -> None:
    long = "the dialog broke; " * 500
    shown = await _answered(runtime, long)
    message = str(shown["errorMessage"])
    assert len(message) == call_states.CLIENT_ERROR_CHARS
    assert message == long[: call_states.CLIENT_ERROR_CHARS - 1] + "…"
    assert shown["clientResult"] == long  # the whole answer stays on record
    shown = await _answered(runtime, "  ")
    assert shown["errorMessage"] == call_states.CLIENT_ERROR_EMPTY


def test_a_call_stored_failed_without_the_message_reads_with_it() -> None:
    stored = {
        "callId": "a1",
        "name": "request_user_approval",
        "state": "failed",
        "outcome": "failed",
        "clientResult": "closed dialog",
        "clientError": True,
    }
    assert ledger.wire(stored)["errorMessage"] == "closed dialog"
    assert "errorMessage" not in stored  # a copy: the stored entry is left as it was
    succeeded = {**stored, "state": "succeeded", "outcome": "succeeded", "clientError": False}
    assert "errorMessage" not in ledger.wire(succeeded)
