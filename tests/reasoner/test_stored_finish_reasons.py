"""Finish reasons stored by older versions read back in this version's words.

Review s1 F4 (round 67): before d8af236 a turn run with the Responses API stored the answer's
``status`` as its finish reason (``completed``, ``incomplete``). Only new answers were mapped:
such a turn still read ``completed`` in the session's ``modelCalls`` (and the console), in a
replayed answer, and an ``incomplete`` one (cut by the output cap) reached an
OpenAI-compatible client as ``stop``. Every stored turn is now read in Chat Completions' words.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from aptix.api.openai.wire import finish_reason
from aptix.api.routes.sessions import turn_to_json
from aptix.llm.types import LlmRequest, LlmResponse
from aptix.reasoner.result import TurnResult
from aptix.reasoner.sql_turns import _in_chat_words
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, reply


@pytest.mark.parametrize(("stored", "reads"), [("completed", "stop"), ("incomplete", "length")])
async def test_a_turn_stored_with_a_responses_status_reads_in_chat_words(
    tmp_path: Path, stored: str, reads: str
) -> None:
    settings = AptixSettings(
        data_dir=tmp_path,
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'aptix.db'}",
        load_plugins=False,
    )

    def old_client(request: LlmRequest) -> LlmResponse:
        # What the Responses client stored before d8af236: the status as the finish reason.
        return dataclasses.replace(reply("answer"), finish_reason=stored)

    async with open_runtime(settings) as runtime:
        created = await runtime.services.sessions.create_session(org="acme", user="ann")
        assert created.result is not None
        session_id = created.result.id
        result = await runtime.reasoner(FunctionModel(old_client)).execute(
            session_id=session_id, org="acme", user="ann", instruction="hi"
        )
        assert result.kind == "ok", result.error
    # Read back by this version (a fresh process: nothing cached).
    async with open_runtime(settings) as runtime:
        (turn,) = await runtime.turns.list_turns(session_id, "acme")
        assert [c["finishReason"] for c in turn.model_calls] == [reads]
        assert [c["finishReason"] for c in turn_to_json(turn)["modelCalls"]] == [reads]
        assert turn.result is not None
        replayed = TurnResult.from_wire(turn.result)
        assert replayed.finish_reason == reads
        assert replayed.to_wire()["finishReason"] == reads
        assert finish_reason(replayed) == reads


def test_tool_calls_and_this_versions_words_are_read_as_such() -> None:
    pending = {"callId": "c1", "requiresClientExecution": True, "outcome": "pending"}
    ran = {"callId": "c2", "outcome": "success"}
    data = _in_chat_words(
        {
            "model_calls": [
                {"finishReason": "completed", "toolCalls": 2},
                {"finishReason": "completed", "toolCalls": 0},
                {"finishReason": "content_filter", "toolCalls": 0},
                {"purpose": "contextSummary", "finishReason": None},
            ],
            "result": {"finishReason": "completed", "toolCalls": [ran, pending]},
            "answers": {
                "k1": {"finishReason": "completed", "toolCalls": [ran]},
                "k2": {"finishReason": "incomplete", "toolCalls": []},
            },
        }
    )
    assert [c["finishReason"] for c in data["model_calls"]] == [
        "tool_calls",
        "stop",
        "content_filter",
        None,
    ]
    assert data["result"]["finishReason"] == "tool_calls"
    assert [a["finishReason"] for a in data["answers"].values()] == ["stop", "length"]
