"""Context summaries and the model's refusals (review r1 F2, F2b, round 68).

A turn the model declined was folded into the summary as ``assistant: `` with nothing after
it, so the summary could not say the model had declined; a summary request the model declined
was reported as an empty summary.
"""

from __future__ import annotations

from pathlib import Path

from aptix.llm.types import LlmRequest, LlmResponse
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, reply
from tests.reasoner.test_summary_takes_turns_leaving_the_window import (
    _is_summary_request,
    _session,
)

DECLINED = "I'm sorry, I can't help with that."


def _settings(tmp_path: Path) -> AptixSettings:
    return AptixSettings(
        data_dir=tmp_path,
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'aptix.db'}",
        load_plugins=False,
        context_strategy="summarize",
        history_turns=2,
    )


async def test_a_declined_turn_is_summarized_as_declined(tmp_path: Path) -> None:
    def answer(request: LlmRequest) -> LlmResponse:
        if _is_summary_request(request):
            return reply("SUMMARY")
        if "help me with X" in str(request.messages[-1]["content"]):
            return reply(None, refusal=DECLINED)
        return reply("ok")

    async with open_runtime(_settings(tmp_path)) as runtime:
        session_id = await _session(runtime)
        model = FunctionModel(answer)
        reasoner = runtime.reasoner(model)
        for instruction in ["Please help me with X", "T2", "T3", "T4", "T5"]:
            result = await reasoner.execute(
                session_id=session_id, org="acme", user="ann", instruction=instruction
            )
            assert not result.warnings
    [first, *_] = [r for r in model.requests if _is_summary_request(r)]
    folded = str(first.messages[-1]["content"])
    assert f"user: Please help me with X\nassistant (declined): {DECLINED}" in folded


async def test_a_declined_summary_request_is_reported_as_declined(tmp_path: Path) -> None:
    def answer(request: LlmRequest) -> LlmResponse:
        if _is_summary_request(request):
            return reply(None, refusal="I can't summarize\x1b[2J this conversation. " * 20)
        return reply("ok")

    async with open_runtime(_settings(tmp_path)) as runtime:
        session_id = await _session(runtime)
        reasoner = runtime.reasoner(FunctionModel(answer))
        for n in range(1, 5):
            result = await reasoner.execute(
                session_id=session_id, org="acme", user="ann", instruction=f"T{n}"
            )
    [warning] = result.warnings
    assert "empty summary" not in warning
    # The model's reason, its controls escaped and shortened: it is the model's text.
    assert warning.startswith(
        "Could not summarize 1 earlier turn(s) (The model declined the summary request: "
        "I can't summarize\\u001b[2J this conversation. I can't"
    )
    assert warning.endswith("…); they were left out of the request instead.")
    assert len(warning) < 400
