"""A match cancelled as the arbiter's model answers is cancelled, not answered.

The arbiter bounded its model call with ``asyncio.wait_for``, which under Python 3.11 drops a
cancel that comes as the call it waits for ends (CPython gh-86296): a turn or request
cancelled then ran on with the arbiter's choice, as if never cancelled.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from aptix.workflows.matching.arbiter import TOOL_NAME, MatchArbiter, ModelAnswer
from tests.workflows.conftest import make_manifest


class AnswersAtOnce:
    """A model that answers as soon as it is asked, telling the test it has."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()

    async def ask(self, messages: list[dict[str, Any]], tool: dict[str, Any]) -> ModelAnswer:
        self.asked.set()
        await asyncio.sleep(0)  # the answer is on its way back: the cancel comes now
        return ModelAnswer(calls=((TOOL_NAME, json.dumps({"workflowId": "create_report"})),))


async def test_a_choice_cancelled_as_the_model_answers_is_cancelled() -> None:
    model = AnswersAtOnce()
    arbiter = MatchArbiter(model, "always", timeout=5)
    candidates = [make_manifest("create_report"), make_manifest("summarise_numbers")]
    choosing = asyncio.ensure_future(arbiter.choose("make me a report", candidates, 1))
    await model.asked.wait()
    assert choosing.cancel()  # the model has answered; the arbiter has not read it yet
    with pytest.raises(asyncio.CancelledError):
        await choosing


async def test_a_model_slower_than_the_limit_still_falls_back() -> None:
    class Slow:
        async def ask(self, messages: list[dict[str, Any]], tool: dict[str, Any]) -> ModelAnswer:
            await asyncio.sleep(10)
            return ModelAnswer()

    arbiter = MatchArbiter(Slow(), "always", timeout=0.05)
    candidates = [make_manifest("create_report"), make_manifest("summarise_numbers")]
    answer = await arbiter.choose("make me a report", candidates, 1)
    assert answer.workflow_id is None
    assert not answer.valid
