"""A turn cut short mid-answer keeps, as its text, what it streamed (DESIGN §14).

Review r6 (round 67) F2: the words a model streamed before Ctrl-C in ``aptix chat`` (or a
SIGHUP, or a client closing its stream) were on the caller's screen, but the turn was stored
with ``text: null``: the resumed chat, HTTP and the console never showed what had been said.
The record now keeps them; its status says they are no finished answer, and the model is not
shown them again as something it said.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aptix.llm.types import LlmRequest, LlmResponse, TextSink
from aptix.reasoner import TurnEvent, TurnResult, stopping
from aptix.testing import call, reply
from tests.reasoner.conftest import Harness

PIECES = ("I will now ", "delete it. ", "word0 ")
STREAMED = "".join(PIECES)


class CutOff:
    """Answers from a list; ``None`` streams :data:`PIECES`, then waits mid-answer."""

    def __init__(self, *steps: LlmResponse | None) -> None:
        self.steps = list(steps)
        self.streamed = asyncio.Event()
        self.requests: list[LlmRequest] = []

    async def complete(self, request: LlmRequest, on_text: TextSink | None = None) -> LlmResponse:
        self.requests.append(request)
        step = self.steps.pop(0)
        if isinstance(step, LlmResponse):
            if on_text is not None and step.text:
                await on_text(step.text)
            return step
        if on_text is not None:
            for piece in PIECES:
                await on_text(piece)
        self.streamed.set()
        await asyncio.sleep(60)
        return reply("never")


async def _start(
    harness: Harness, model: CutOff, instruction: str = "delete it"
) -> tuple[asyncio.Task[TurnResult], list[TurnEvent]]:
    events: list[TurnEvent] = []

    async def sink(event: TurnEvent) -> None:
        events.append(event)

    reasoner = harness.runtime.reasoner(model)
    running = asyncio.ensure_future(
        reasoner.execute(
            session_id=harness.session_id,
            org="acme",
            user="ann",
            instruction=instruction,
            on_event=sink,
        )
    )
    await asyncio.wait_for(model.streamed.wait(), 30)
    return running, events


async def _turns(harness: Harness) -> list[Any]:
    return await harness.runtime.turns.list_turns(harness.session_id, "acme")


async def test_a_turn_cancelled_mid_answer_keeps_the_text_it_streamed(harness: Harness) -> None:
    model = CutOff(None, reply("Here."))
    running, events = await _start(harness, model)
    [turn] = await _turns(harness)
    assert await harness.runtime.reasoner(model).stop(turn.id)
    result = await running
    assert result.kind == "cancelled"
    assert result.text == STREAMED  # the answer says what the client was shown
    shown = "".join(e.data["delta"] for e in events if e.type == "text_delta")
    assert shown == STREAMED
    [stored] = await _turns(harness)
    assert (stored.status, stored.text) == ("cancelled", STREAMED)

    # The model is not told the fragment as something it said: only how the turn ended.
    await harness.runtime.reasoner(model).execute(
        session_id=harness.session_id, org="acme", user="ann", instruction="still there?"
    )
    told = [str(m.get("content")) for m in model.requests[-1].messages]
    assert not any("word0" in m for m in told)


async def test_text_cut_off_after_a_tool_ran_replaces_the_text_beside_the_call(
    harness: Harness,
) -> None:
    # The turn's text is its latest model text: here the fragment, not "Adding." before it.
    model = CutOff(reply("Adding.", call("agent_calculator", {"expression": "1+1"})), None)
    running, _ = await _start(harness, model)
    [turn] = await _turns(harness)
    assert await harness.runtime.reasoner(model).stop(turn.id)
    assert (await running).kind == "cancelled"
    [stored] = await _turns(harness)
    assert stored.text == STREAMED
    assert [c["outcome"] for c in stored.tool_calls] == ["succeeded"]


async def test_a_turn_cut_short_by_a_shutdown_mid_answer_reads_interrupted_with_its_text(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As `aptix chat` ended by SIGHUP or SIGTERM, or a stopping server, cuts it short.
    model = CutOff(None, reply("Back."))
    running, _ = await _start(harness, model)
    monkeypatch.setattr(stopping, "_PROCESS", {"stopping": False})
    stopping.stop_process()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    monkeypatch.setattr(stopping, "_PROCESS", {"stopping": False})  # the next process
    [stored] = await _turns(harness)
    assert (stored.status, stored.text) == ("running", STREAMED)  # its lease ended at once
    await harness.runtime.reasoner(model).execute(
        session_id=harness.session_id, org="acme", user="ann", instruction="are you there?"
    )
    first, _ = await _turns(harness)
    assert (first.status, first.text) == ("interrupted", STREAMED)


async def test_without_a_listener_nothing_streamed_and_no_text_is_kept(harness: Harness) -> None:
    # A JSON (not streamed) request was shown nothing: its cancelled turn has no text.
    model = CutOff(None)
    reasoner = harness.runtime.reasoner(model)
    running = asyncio.ensure_future(
        reasoner.execute(session_id=harness.session_id, org="acme", user="ann", instruction="go")
    )
    await asyncio.wait_for(model.streamed.wait(), 30)
    [turn] = await _turns(harness)
    assert await reasoner.stop(turn.id)
    assert (await running).kind == "cancelled"
    [stored] = await _turns(harness)
    assert stored.text is None
