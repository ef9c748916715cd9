"""The model is told how an earlier turn ended that did not complete (DESIGN §14, History).

A failed, cancelled or interrupted turn replays with one note after its last message, so its
instruction is not followed at once by the next one as if it had been answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aptix.errors import LlmError
from aptix.llm.types import LlmRequest, LlmResponse, Message
from aptix.reasoner import AgentReasoner, TurnRecord, TurnResult, stopping
from aptix.reasoner.context import ContextBudget, EstimatedTokens
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, call, reply

Step = LlmResponse | LlmError | Callable[[], Awaitable[LlmResponse]]


class Script:
    """A model answering each request with the next step: a reply, an error, or a wait."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.asked = asyncio.Event()
        self.model = FunctionModel(self._answer)

    def add(self, *steps: Step) -> None:
        self.steps.extend(steps)

    async def _answer(self, request: LlmRequest) -> LlmResponse:
        step = self.steps.pop(0)
        if isinstance(step, LlmError):
            raise step
        if isinstance(step, LlmResponse):
            return step
        return await step()

    async def hang(self) -> LlmResponse:
        self.asked.set()
        await asyncio.sleep(60)
        return reply("late")

    def seen(self) -> list[tuple[str, Any]]:
        """The non-system messages of the last request: role and content (or call ids)."""
        # A tool result shows the call it answers; a model message with calls, their ids.
        shown: list[tuple[str, Any]] = []
        for m in self.model.requests[-1].messages:
            if m["role"] == "system":
                continue
            calls = [c["id"] for c in m.get("tool_calls") or ()]
            shown.append((m["role"], m.get("tool_call_id") or calls or m.get("content")))
        return shown


@pytest.fixture
async def runtime(database_url: str, tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = AptixSettings(data_dir=tmp_path, database_url=database_url, load_plugins=False)
    async with open_runtime(settings) as opened:
        yield opened


@pytest.fixture
def script() -> Script:
    return Script()


@dataclass
class Chat:
    """One session, asked through the real loop."""

    runtime: Runtime
    reasoner: AgentReasoner
    session_id: str

    async def ask(self, instruction: str) -> TurnResult:
        return await self.reasoner.execute(
            session_id=self.session_id, org="acme", user="ann", instruction=instruction
        )


@pytest.fixture
async def chat(runtime: Runtime, script: Script) -> Chat:
    created = await runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    return Chat(runtime, runtime.reasoner(script.model), created.result.id)


FAILED = "The model endpoint answered 500: overloaded."


async def test_a_turn_that_failed_before_any_call_is_followed_by_how_it_ended(
    chat: Chat, script: Script
) -> None:
    script.add(LlmError(FAILED), reply("Fine now."))
    assert (await chat.ask("first")).kind == "error"
    assert (await chat.ask("second")).text == "Fine now."
    assert script.seen() == [
        ("user", "first"),
        ("assistant", f"[This turn ended without a final answer: it failed. {FAILED}]"),
        ("user", "second"),
    ]


async def test_a_turn_that_failed_after_a_call_ran_ends_with_the_note_after_its_result(
    chat: Chat, script: Script
) -> None:
    script.add(
        reply(None, call("agent_calculator", {"expression": "1+1"}, id="c1")),
        LlmError(FAILED),
        reply("Two, as computed."),
    )
    assert (await chat.ask("add")).kind == "error"
    await chat.ask("what was it?")
    assert script.seen() == [
        ("user", "add"),
        ("assistant", ["c1"]),
        ("tool", "c1"),
        ("assistant", f"[This turn ended without a final answer: it failed. {FAILED}]"),
        ("user", "what was it?"),
    ]


async def test_a_cancelled_turn_is_followed_by_how_it_ended(chat: Chat, script: Script) -> None:
    script.add(script.hang, reply("Here."))
    first = asyncio.create_task(chat.ask("wait"))
    await asyncio.wait_for(script.asked.wait(), 30)
    [turn] = await chat.runtime.turns.list_turns(chat.session_id, "acme")
    assert await chat.reasoner.stop(turn.id)
    assert (await first).kind == "cancelled"
    await chat.ask("still there?")
    assert script.seen() == [
        ("user", "wait"),
        ("assistant", "[This turn ended without a final answer: it was cancelled.]"),
        ("user", "still there?"),
    ]


async def test_a_turn_cut_short_by_a_shutdown_is_followed_by_how_it_ended(
    chat: Chat, script: Script, monkeypatch: pytest.MonkeyPatch
) -> None:
    script.add(script.hang, reply("Back."))
    first = asyncio.create_task(chat.ask("wait"))
    await asyncio.wait_for(script.asked.wait(), 30)
    monkeypatch.setattr(stopping, "_PROCESS", {"stopping": False})
    stopping.stop_process()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    monkeypatch.setattr(stopping, "_PROCESS", {"stopping": False})  # the next process
    await chat.ask("are you there?")
    assert script.seen() == [
        ("user", "wait"),
        (
            "assistant",
            "[This turn ended without a final answer: the process running it stopped or lost "
            "contact with the database.]",
        ),
        ("user", "are you there?"),
    ]


def _turn(seq: int, status: str, messages: list[Message], **fields: Any) -> TurnRecord:
    return TurnRecord(
        id=f"t{seq}",
        session_id="s",
        org="acme",
        user="ann",
        seq=seq,
        instruction=str(messages[0]["content"]),
        status=status,  # type: ignore[arg-type]
        messages=messages,
        **fields,
    )


async def test_the_note_is_counted_by_the_budget_and_goes_with_its_turn() -> None:
    system: Message = {"role": "system", "content": "You help."}
    failed = _turn(1, "error", [{"role": "user", "content": "first"}], result={"error": FAILED})
    current = _turn(2, "running", [{"role": "user", "content": "second"}])
    counter = EstimatedTokens()
    probe = ContextBudget(10_000, counter=counter)
    without_note = probe.request_tokens([system, *failed.messages, *current.messages], ())
    # Room for the failed turn's instruction, not for the note after it: both are left out.
    budget = ContextBudget(without_note, counter=counter)
    sent = await budget.prepare(
        current, system, [failed], (), FunctionModel(lambda _: reply("unused"))
    )
    assert [m["content"] for m in sent] == ["You help.", "second"]
    assert current.context_dropped == {"turns": 1, "throughTurnId": "t1", "summarized": 0}
