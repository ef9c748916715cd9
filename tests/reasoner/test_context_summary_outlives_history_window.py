"""A context summary keeps standing for its turns after its turn leaves the history window."""

from __future__ import annotations

from pathlib import Path

from aptix.llm.types import LlmRequest, LlmResponse
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, reply
from tests.reasoner.test_context import _fixed_tokens

HISTORY_TURNS = 3
FACT = "SUMMARY-A: the user's account number is 4711"


def _is_summary_request(request: LlmRequest) -> bool:
    return str(request.messages[0]["content"]).startswith("You condense")


def _answer(request: LlmRequest) -> LlmResponse:
    return reply(FACT) if _is_summary_request(request) else reply("ok")


async def test_the_summary_is_sent_and_counted_however_many_short_turns_follow(
    tmp_path: Path, database_url: str
) -> None:
    # Room for about two long turns (500 tokens each): the third summarizes the first two.
    limit = await _fixed_tokens(tmp_path / "probe") + 1_300
    settings = AptixSettings(
        data_dir=tmp_path,
        database_url=database_url,
        load_plugins=False,
        llm_context_tokens=limit,
        context_strategy="summarize",
        history_turns=HISTORY_TURNS,
    )
    async with open_runtime(settings) as runtime:
        created = await runtime.services.sessions.create_session(org="acme", user="ann")
        assert created.result is not None
        session_id = created.result.id
        model = FunctionModel(_answer)
        reasoner = runtime.reasoner(model)

        async def turn(instruction: str) -> None:
            result = await reasoner.execute(
                session_id=session_id, org="acme", user="ann", instruction=instruction
            )
            assert result.kind == "ok", result.error

        for n in range(4):
            await turn(f"long {n} " + "u" * 1_500)
        assert sum(1 for r in model.requests if _is_summary_request(r)) == 1
        written = (await runtime.turns.list_turns(session_id, "acme"))[-1].context_dropped
        assert written is not None
        assert written["summarized"] > 0
        # Many more short turns than the window holds: the summary keeps standing, and the
        # turns that leave the window join it (review r7 F2: they were lost in between).
        for n in range(3 * HISTORY_TURNS):
            before = sum(1 for r in model.requests if _is_summary_request(r))
            await turn(f"small {n}")
            main = model.requests[-1]
            assert not _is_summary_request(main)
            sent = [str(m.get("content")) for m in main.messages]
            assert any(FACT in content for content in sent), f"summary lost after small {n}"
            [latest] = await runtime.turns.list_turns(session_id, "acme", limit=1)
            dropped = latest.context_dropped
            assert dropped is not None, f"contextDropped null after small {n}"
            assert dropped["summarized"] >= written["summarized"]
            # Every turn older than the window is left out, and the summary stands for each.
            assert dropped["turns"] == dropped["summarized"]
            assert dropped["turns"] >= latest.seq - 1 - HISTORY_TURNS
            assert sum(1 for r in model.requests if _is_summary_request(r)) - before <= 1
