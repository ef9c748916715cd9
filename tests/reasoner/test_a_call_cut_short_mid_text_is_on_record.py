"""A model call ended without its response once its text came is on the turn's record.

Review r7 F1 (round 72): such a call is charged, an estimate, in ``/v1/usage``
(:class:`aptix.quotas.MeteredModel`), but the turn's ``model_calls`` held nothing of it, after
a shutdown mid-text (SIGTERM) as after a cancel. It is now recorded, marked ``estimated``,
with the tokens it was charged; so is one whose stream failed after text came, charged alike.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aptix.errors import LlmError
from aptix.llm.types import LlmRequest, LlmResponse, TextSink
from aptix.quotas import PAYER, Payer
from aptix.quotas.usage import today
from aptix.reasoner import TurnEvent, TurnResult, stopping
from aptix.testing import reply
from tests.reasoner.conftest import Harness

PIECES = ("one ", "two ")


class CutOff:
    """Streams :data:`PIECES`, then waits (``fail``: fails) mid-answer; then answers."""

    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.streamed = asyncio.Event()
        self.calls = 0

    async def complete(self, request: LlmRequest, on_text: TextSink | None = None) -> LlmResponse:
        self.calls += 1
        if self.calls > 1:
            return reply("Back.")
        assert on_text is not None
        for piece in PIECES:
            await on_text(piece)
        self.streamed.set()
        if self.fail:
            raise LlmError("The model's stream broke off.")
        await asyncio.sleep(60)
        return reply("never")


async def _start(harness: Harness, model: CutOff) -> asyncio.Task[TurnResult]:
    async def sink(event: TurnEvent) -> None:
        pass

    PAYER.set(Payer("acme", "key-1", "ann"))  # the task runs metered, as a request does
    running = asyncio.ensure_future(
        harness.runtime.reasoner(model).execute(
            session_id=harness.session_id, org="acme", user="ann", instruction="go", on_event=sink
        )
    )
    await asyncio.wait_for(model.streamed.wait(), 30)
    return running


async def _charged(harness: Harness) -> dict[str, Any]:
    return await harness.runtime.quotas.usage.read("acme", today())


async def test_a_shutdown_mid_text_leaves_the_call_on_record_as_charged(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = CutOff()
    running = await _start(harness, model)
    monkeypatch.setattr(stopping, "_PROCESS", {"stopping": False})
    stopping.stop_process()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    [stored] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert stored.text == "".join(PIECES)
    [call] = stored.model_calls
    charged = await _charged(harness)
    assert charged["modelCalls"] == 1
    assert call["estimated"] is True
    assert (call["promptTokens"], call["completionTokens"]) == (
        charged["promptTokens"],
        charged["completionTokens"],
    )
    assert call["completionTokens"] >= 1


async def test_a_stream_failing_after_its_text_leaves_the_call_on_record_as_charged(
    harness: Harness,
) -> None:
    model = CutOff(fail=True)
    result = await (await _start(harness, model))
    assert result.kind == "error"
    charged = await _charged(harness)
    assert charged["modelCalls"] == 1
    assert result.usage.total_tokens == charged["totalTokens"]
    [stored] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    [call] = stored.model_calls
    assert call["estimated"] is True
    assert call["promptTokens"] + call["completionTokens"] == charged["totalTokens"]


async def test_a_completed_call_is_not_marked_estimated(harness: Harness) -> None:
    harness.model.add(reply("Done."))
    await harness.reasoner.execute(
        session_id=harness.session_id, org="acme", user="ann", instruction="go"
    )
    [stored] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    [call] = stored.model_calls
    assert "estimated" not in call
