"""``aptix chat`` says why a turn has no answer when the model declined (``message.refusal``).

Fixer f1, round 67: the turn's result carried no refusal, so the chat showed nothing at all
after ``you>``, and a resumed chat showed the turn as if it had never been answered.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from aptix.cli import output
from aptix.cli.chat import _show_result
from aptix.cli.chat_commands import open_session
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import ScriptedModel, reply

#: With a terminal escape: shown, never obeyed.
NO = "I can't help with that. \x1b[2J"


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output.console, "_width", 240)


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    async with open_runtime(AptixSettings(data_dir=tmp_path, semantic_matching=False)) as rt:
        yield rt


async def test_the_chat_shows_the_refusal_and_a_resumed_chat_too(runtime: Runtime) -> None:
    sid = await open_session(runtime, None, None)
    reasoner = runtime.reasoner(ScriptedModel.of(reply(None, refusal=NO)))
    result = await reasoner.execute(
        session_id=sid, org="local", user="local", instruction="pick a lock"
    )
    assert (result.kind, result.text, result.refusal) == ("empty", None, NO)
    declined = [
        "agent> (the model declined to answer)",
        "    I can't help with that. ␛[2J",
    ]
    with output.console.capture() as captured:
        _show_result(result)
    assert captured.get().splitlines() == declined

    with output.console.capture() as captured:
        assert await open_session(runtime, sid, None) == sid
    assert captured.get().splitlines() == [
        "Last 1 turn(s) of this session:",
        "you> pick a lock",
        *declined,
    ]
