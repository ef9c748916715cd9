"""The arbiter's fallbacks are logged as what they are, readably, once per cached key."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from aptix.workflows.matching.arbiter import TOOL_NAME, MatchArbiter, ModelAnswer
from tests.workflows.conftest import make_manifest

CANDIDATES = [make_manifest("create_report"), make_manifest("summarise_numbers")]


class Answers:
    """An arbiter model that sends back the given answers in turn."""

    def __init__(self, *answers: ModelAnswer) -> None:
        self.answers = list(answers)

    async def ask(self, messages: list[dict[str, Any]], tool: dict[str, Any]) -> ModelAnswer:
        return self.answers.pop(0)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


async def test_unreadable_answers_are_logged_as_such_with_what_the_model_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    arbiter = MatchArbiter(
        Answers(
            ModelAnswer(((TOOL_NAME, "{not json"),)),
            ModelAnswer((), "I think create_report fits"),
            ModelAnswer((), ""),
            ModelAnswer(((TOOL_NAME, '{"workflowId": 7}'),)),
            ModelAnswer((("other_tool", "{}"),)),
        ),
        "always",
    )
    with caplog.at_level(logging.WARNING, logger="aptix.workflows"):
        for index in range(5):
            answer = await arbiter.choose(f"message {index}", CANDIDATES, 1)
            assert not answer.valid
    logged = _warnings(caplog)
    unreadable = "The match arbiter's answer could not be read ({}); the ranker's choice stands."
    assert logged == [
        unreadable.format("choose_workflow with arguments '{not json'"),
        unreadable.format("the text 'I think create_report fits'"),
        unreadable.format("an empty answer"),
        unreadable.format("""choose_workflow with arguments '{"workflowId": 7}'"""),
        unreadable.format("a call to 'other_tool', not choose_workflow"),
    ]
    assert not any("None" in line for line in logged)


async def test_a_fallback_is_logged_once_per_revision_message_and_candidates(
    caplog: pytest.LogCaptureFixture,
) -> None:
    prose = ModelAnswer((), "no idea")
    arbiter = MatchArbiter(Answers(*[prose] * 4), "always")
    with caplog.at_level(logging.WARNING, logger="aptix.workflows"):
        await arbiter.choose("the same message", CANDIDATES, 1)
        await arbiter.choose("the same message", CANDIDATES, 1)  # asked again, not logged
        await arbiter.choose("another message", CANDIDATES, 1)
        await arbiter.choose("the same message", CANDIDATES, 2)  # a new catalog revision
    assert arbiter.calls == 4
    assert len(_warnings(caplog)) == 3


async def test_an_id_not_offered_is_shown_bounded_and_escaped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sent = "secret\x1b[31m\u202e" + "x" * 200
    arbiter = MatchArbiter(
        Answers(ModelAnswer(((TOOL_NAME, json.dumps({"workflowId": sent})),))), "always"
    )
    with caplog.at_level(logging.WARNING, logger="aptix.workflows"):
        assert not (await arbiter.choose("message", CANDIDATES, 1)).valid
    (line,) = _warnings(caplog)
    assert line.startswith(r"The match arbiter answered 'secret\x1b[31m\u202exxx")
    assert line.endswith("'…, which is not a candidate; the ranker's choice stands.")
    assert "\x1b" not in line
    assert "\u202e" not in line
    assert "x" * 100 not in line
