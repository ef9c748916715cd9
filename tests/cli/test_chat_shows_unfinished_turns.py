"""``aptix chat --session-id`` never shows the text of a turn that did not complete as an answer.

Review r1 (round 66) F1: a turn that failed, was cancelled or was cut short by a shutdown kept
the text the model wrote beside its calls ("I will add it now."), and the resumed chat showed it
as ``agent> I will add it now.``: three promises read as three finished answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from aptix.cli import output
from aptix.cli.chat_commands import open_session
from aptix.errors import LlmError
from aptix.llm.types import LlmRequest, LlmResponse
from aptix.reasoner import ToolResultInput, stopping
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, call, reply

ADD = {"expression": "1+1"}
APPROVAL = {"prompt": "Go on?", "action": "go on"}


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output.console, "_width", 240)


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    async with open_runtime(AptixSettings(data_dir=tmp_path, semantic_matching=False)) as rt:
        yield rt


class Script:
    """A model answering each request with the next step: a reply, an error, or a hang."""

    def __init__(self) -> None:
        self.steps: list[LlmResponse | LlmError | None] = []
        self.asked = asyncio.Event()
        self.model = FunctionModel(self._answer)

    async def _answer(self, request: LlmRequest) -> LlmResponse:
        step = self.steps.pop(0)
        if isinstance(step, LlmError):
            raise step
        if step is not None:
            return step
        self.asked.set()  # None: hang until the turn is stopped
        await asyncio.sleep(60)
        return reply("late")


async def test_a_resumed_chat_shows_each_unfinished_turn_as_such_with_its_calls(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = await open_session(runtime, None, None)
    script = Script()
    reasoner = runtime.reasoner(script.model)

    async def ask(instruction: str | None, results: list[ToolResultInput] | None = None) -> object:
        return await reasoner.execute(
            session_id=sid, org="local", user="local", instruction=instruction, tool_results=results
        )

    # 1: the tool ran, then the model failed (its message carries a terminal escape).
    script.steps += [
        reply("I will add it now.", call("agent_calculator", ADD, id="c1")),
        LlmError("The model endpoint answered HTTP 500: \x1b[2J overloaded"),
    ]
    await ask("add then fail")
    # 2: cancelled while the model thought after the tool had run.
    script.steps += [reply("I will add it again.", call("agent_calculator", ADD, id="c2")), None]
    run = asyncio.ensure_future(ask("add then cancel"))
    await asyncio.wait_for(script.asked.wait(), 30)
    script.asked.clear()
    [turn] = await runtime.turns.list_turns(sid, "local", limit=1)
    assert await reasoner.stop(turn.id)
    await run
    # 3: the client answered its approval with an error (r1-F2), then the turn was cancelled.
    script.steps += [reply("Asking you first.", call("request_user_approval", APPROVAL, id="a1"))]
    await ask("ask first")
    script.steps += [None]
    run = asyncio.ensure_future(ask(None, [ToolResultInput("a1", "closed dialog", True)]))
    await asyncio.wait_for(script.asked.wait(), 30)
    script.asked.clear()
    [turn] = await runtime.turns.list_turns(sid, "local", limit=1)
    assert await reasoner.stop(turn.id)
    await run
    # 4: cut short by the process's shutdown while the model thought.
    script.steps += [reply("Working on it.", call("agent_calculator", ADD, id="c4")), None]
    run = asyncio.ensure_future(ask("add then stop"))
    await asyncio.wait_for(script.asked.wait(), 30)
    monkeypatch.setattr(stopping, "_PROCESS", {"stopping": False})
    stopping.stop_process()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    monkeypatch.setattr(stopping, "_PROCESS", {"stopping": False})  # the next process
    # 5: a turn that completed reads as before.
    script.steps += [reply("All done.")]
    await ask("plain")

    with output.console.capture() as captured:
        assert await open_session(runtime, sid, None) == sid
    shown = captured.get().splitlines()
    statuses = [t.status for t in await runtime.turns.list_turns(sid, "local", limit=5)]
    assert statuses == ["error", "cancelled", "cancelled", "interrupted", "completed"]
    assert shown == [
        "Last 5 turn(s) of this session:",
        "you> add then fail",
        "agent> (turn error: it failed and ended without a finished answer)",
        "  error: model_error: The model endpoint answered HTTP 500: ␛[2J overloaded",
        "  partial text, not a finished answer:",
        "    I will add it now.",
        "  ⚙ agent_calculator → succeeded",
        "you> add then cancel",
        "agent> (turn cancelled: it was cancelled and ended without a finished answer)",
        "  partial text, not a finished answer:",
        "    I will add it again.",
        "  ⚙ agent_calculator → succeeded",
        "you> ask first",
        "agent> (turn cancelled: it was cancelled and ended without a finished answer)",
        "  partial text, not a finished answer:",
        "    Asking you first.",
        "  ⚙ request_user_approval → failed: closed dialog",
        "you> add then stop",
        "agent> (turn interrupted: the process running it stopped or lost contact with the "
        "database; it ended without a finished answer)",
        "  partial text, not a finished answer:",
        "    Working on it.",
        "  ⚙ agent_calculator → succeeded",
        "you> plain",
        "agent> All done.",
    ]


async def test_no_row_of_a_resumed_turns_text_starts_where_the_chats_labels_do(
    runtime: Runtime,
) -> None:
    """An instruction or answer of several lines keeps every row under its label.

    A stored line reading "agent> done" or "you> yes" at column 0 would pass for the chat's
    own label: a user's pasted text, or a model's answer, could fake a turn that never was.
    """
    sid = await open_session(runtime, None, None)
    script = Script()
    reasoner = runtime.reasoner(script.model)
    script.steps += [reply("First line.\nyou> approve everything\n\nagent> all done")]
    await reasoner.execute(
        session_id=sid, org="local", user="local", instruction="hello\nagent> sure, done"
    )

    with output.console.capture() as captured:
        await open_session(runtime, sid, None)
    shown = captured.get().splitlines()
    assert shown == [
        "Last 1 turn(s) of this session:",
        "you> hello",
        "     agent> sure, done",
        "agent> First line.",
        "       you> approve everything",
        "       ",
        "       agent> all done",
    ]
