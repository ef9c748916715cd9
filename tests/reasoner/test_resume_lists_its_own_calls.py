"""A resume's answer lists the approvals it settled and the calls asked for since, no others.

docs/http-api.md ("Turns"). The server calls of the response that handed the approval over
ran in the request that got the hand-off, which listed them: wherever they sit in that
response, before the approval or after it, a resume lists none of them again (review r6 F2).
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import update

import aptix
from aptix.api import create_app
from aptix.db.types import utc_now
from aptix.errors import LlmError
from aptix.reasoner import ToolResultInput, TurnResult
from aptix.reasoner.tables import TurnRow
from aptix.testing import ScriptedModel, call, reply
from tests.reasoner.conftest import Died, Harness
from tests.reasoner.gated import RUNS, Wipe, register_unguarded

APPROVE = '{"approved": true}'


@aptix.tool(usage="Charges an invoice.")
async def charge(invoice: int) -> str:
    """Charges an invoice.

    Args:
        invoice: The invoice number.
    """
    RUNS.append(f"charge {invoice}")
    return f"charged {invoice}"


C1, C2, C3 = (
    call("charge", {"invoice": 1}, id="c1"),
    call("wipe", {}, id="c2"),
    call("charge", {"invoice": 3}, id="c3"),
)
#: One response: a server call, the call needing approval, another server call.
BATCH = (C1, C2, C3)


@pytest.fixture(autouse=True)
def _tools(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    register_unguarded(harness, monkeypatch, Wipe, charge)  # offered by _reasoner, not a mode
    RUNS.clear()


def _reasoner(h: Harness, model: ScriptedModel) -> aptix.AgentReasoner:
    reasoner = h.runtime.reasoner(model)
    reasoner._offered = lambda _w, tools, _o: [*tools, "wipe", "charge"]
    return reasoner


async def _execute(h: Harness, model: ScriptedModel, **request: Any) -> TurnResult:
    ids = {"session_id": h.session_id, "org": "acme", "user": "ann"}
    return await _reasoner(h, model).execute(**ids, **request)


async def _dies(h: Harness, model: ScriptedModel, results: list[ToolResultInput]) -> None:
    """The resume's process dies as the model answers, and its lease runs out."""
    with pytest.raises(Died):
        await _execute(h, model, tool_results=results)
    async with h.runtime.database.transaction() as tx:
        await tx.execute(update(TurnRow).values(lease_until=utc_now() - timedelta(seconds=1)))


def _listed(result: TurnResult | dict[str, Any]) -> list[tuple[str, str]]:
    calls = result.tool_calls if isinstance(result, TurnResult) else result["toolCalls"]
    return [(c["callId"], c["outcome"]) for c in calls]


@pytest.mark.parametrize(
    "batch", [BATCH, (C2, C1, C3), (C1, C3, C2)], ids=["around", "after", "before"]
)
async def test_a_resume_lists_its_approval_not_the_server_calls_of_its_batch(
    harness: Harness, batch: tuple[Any, ...]
) -> None:
    model = ScriptedModel()
    model.add(reply(None, *batch), reply("Done."))
    handed = await _execute(harness, model, instruction="charge 1 and 3, wipe")
    assert sorted(_listed(handed)) == [("c1", "succeeded"), ("c2", "pending"), ("c3", "succeeded")]
    resumed = await _execute(harness, model, tool_results=[ToolResultInput("c2", APPROVE)])
    assert (resumed.kind, resumed.text) == ("ok", "Done.")
    assert _listed(resumed) == [("c2", "succeeded")]
    assert sorted(RUNS) == ["charge 1", "charge 3", "wipe"]


async def test_a_resume_lists_the_calls_asked_for_since_but_not_the_batch_before(
    harness: Harness,
) -> None:
    model = ScriptedModel()
    model.add(
        reply(None, *BATCH),
        reply(None, call("charge", {"invoice": 4}, id="c4")),
        reply("Done."),
    )
    await _execute(harness, model, instruction="charge 1 and 3, wipe, then charge 4")
    resumed = await _execute(harness, model, tool_results=[ToolResultInput("c2", APPROVE)])
    assert _listed(resumed) == [("c2", "succeeded"), ("c4", "succeeded")]


async def test_a_retried_resume_lists_what_its_crashed_attempt_ran_not_the_batch_before(
    harness: Harness,
) -> None:
    # The first attempt runs the approval and the model's next call, then the process dies:
    # the retry's answer lists both (the client never read the first one), and only them.
    model = ScriptedModel()
    model.add(reply(None, *BATCH))
    await _execute(harness, model, instruction="charge 1 and 3, wipe, then charge 4")
    approve = [ToolResultInput("c2", APPROVE)]
    model.add(reply(None, call("charge", {"invoice": 4}, id="c4")), Died())  # type: ignore[arg-type]
    await _dies(harness, model, approve)
    model.add(reply("Done."))
    retried = await _execute(harness, model, tool_results=approve)
    assert retried.text == "Done."
    assert _listed(retried) == [("c2", "succeeded"), ("c4", "succeeded")]
    assert RUNS == ["charge 1", "charge 3", "wipe", "charge 4"]  # none ran twice


async def test_the_openai_endpoint_lists_the_resumes_calls_alike(harness: Harness) -> None:
    # The same reasoner answers /v1/chat/completions: aptix.toolCalls is the resume's list.
    model = ScriptedModel()
    model.add(reply(None, *BATCH), reply("Done."))
    app = create_app(runtime=harness.runtime, model=model)
    app.state.reasoner._offered = lambda _w, tools, _o: [*tools, "wipe", "charge"]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1/v1") as client:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "charge, wipe, charge"}]
        asked = {"model": "aptix-general", "messages": messages}
        first = (await client.post("/chat/completions", json=asked)).json()
        assert sorted(_listed(first["aptix"])) == [
            ("c1", "succeeded"),
            ("c2", "pending"),
            ("c3", "succeeded"),
        ]
        messages += [
            first["choices"][0]["message"],
            {"role": "tool", "tool_call_id": "c2", "content": json.dumps({"approved": True})},
        ]
        answered = await client.post("/chat/completions", json=asked)
    assert answered.status_code == 200, answered.text
    assert answered.json()["choices"][0]["message"]["content"] == "Done."
    assert _listed(answered.json()["aptix"]) == [("c2", "succeeded")]


@pytest.mark.parametrize("then", ["the same results", "a new instruction"])
async def test_a_retried_resume_the_model_fails_can_be_retried_again(
    harness: Harness, then: str
) -> None:
    # The retry of a resume a crash cut short found the turn interrupted, its call no longer
    # pending; a model failure set it "pending" with nothing pending, which refused the same
    # results and every new instruction for good (review s4 F1). It stays interrupted.
    model = ScriptedModel()
    model.add(reply(None, C2))
    await _execute(harness, model, instruction="wipe")
    approve = [ToolResultInput("c2", APPROVE)]
    model.add(Died())  # type: ignore[arg-type]
    await _dies(harness, model, approve)
    model.add(LlmError("the model endpoint answered 500"))
    failed = await _execute(harness, model, tool_results=approve)
    assert (failed.kind, failed.error_code) == ("error", "model_error")
    model.add(reply("Done."))
    if then == "the same results":
        answered = await _execute(harness, model, tool_results=approve)
    else:
        answered = await _execute(harness, model, instruction="and now?")
    assert (answered.kind, answered.text) == ("ok", "Done.")
    assert RUNS == ["wipe"]  # not again
