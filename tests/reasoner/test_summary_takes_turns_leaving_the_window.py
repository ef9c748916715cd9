"""Under ``summarize``, turns that leave the ``APTIX_HISTORY_TURNS`` window join the summary.

Review r7 F2 (round 67): once a summary stood, turns leaving the window after it were neither
summarized nor sent nor counted in ``contextDropped`` (a silent hole between the summary and
the oldest turn sent). Every turn not sent is now in the summary, or counted as dropped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from aptix.errors import LlmError
from aptix.llm.types import LlmRequest, LlmResponse
from aptix.reasoner.context import ContextBudget, EstimatedTokens
from aptix.reasoner.record import TurnRecord
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, reply
from tests.reasoner.test_context import _fixed_tokens

HISTORY_TURNS = 8
_MARK = re.compile(r"\bT(\d+)\b")


def _is_summary_request(request: LlmRequest) -> bool:
    return str(request.messages[0]["content"]).startswith("You condense")


def _answer(request: LlmRequest) -> LlmResponse:
    """Summaries name every turn marker they were given (the previous summary's too)."""
    if not _is_summary_request(request):
        return reply("ok")
    seen = sorted({int(n) for n in _MARK.findall(str(request.messages[-1]["content"]))})
    return reply("SUMMARY covers " + " ".join(f"T{n}" for n in seen))


def _coverage(request: LlmRequest) -> tuple[list[int], list[int]]:
    """The turn markers in the request's summary, and those of the turns sent in full."""
    summary: list[int] = []
    kept: list[int] = []
    for message in request.messages[1:-1]:
        content = str(message.get("content") or "")
        if content.startswith("[Summary of the earlier conversation"):
            summary = [int(n) for n in _MARK.findall(content)]
        elif message.get("role") == "user":
            kept.extend(int(n) for n in _MARK.findall(content))
    return summary, kept


async def _session(runtime: Runtime) -> str:
    created = await runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    return created.result.id


async def test_every_earlier_turn_is_summarized_or_sent_however_many_turns_follow(
    tmp_path: Path, database_url: str
) -> None:
    # Room for about two long turns (500 tokens each): the third summarizes the first ones.
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
        session_id = await _session(runtime)
        model = FunctionModel(_answer)
        reasoner = runtime.reasoner(model)
        total = 4 + 3 * HISTORY_TURNS
        folds: list[int] = []
        for n in range(1, total + 1):
            text = f"T{n} " + ("u" * 1_500 if n <= 4 else "short")
            result = await reasoner.execute(
                session_id=session_id, org="acme", user="ann", instruction=text
            )
            assert result.kind == "ok", result.error
            main = model.requests[-1]
            assert not _is_summary_request(main)
            summary, kept = _coverage(main)
            # Every earlier turn exactly once: in the summary or sent whole, in order.
            assert sorted(summary + kept) == list(range(1, n)), (n, summary, kept)
            assert kept == sorted(kept)
            assert not set(summary) & set(kept)
            turns = await runtime.turns.list_turns(session_id, "acme")
            latest = turns[-1]
            unsent = turns[: (kept[0] if kept else n) - 1]  # turn n has seq n
            # Each turn not sent is in the summary, and contextDropped says so.
            assert summary == [t.seq for t in unsent]
            assert latest.context_dropped == (
                {"turns": len(unsent), "throughTurnId": unsent[-1].id, "summarized": len(unsent)}
                if unsent
                else None
            )
            assert not latest.warnings
            summaries = sum(1 for r in model.requests if _is_summary_request(r))
            folds.append(summaries - sum(folds))
        # The third turn summarizes T1-T2 for the budget. T12 is the first turn whose window
        # (T4-T11) leaves a turn (T3) between it and the summary: folded with a quarter of
        # the window (T4, T5) ahead, so one summary request serves three turns, not one.
        assert [n for n, fold in enumerate(folds, 1) if fold] == [3, *range(12, total + 1, 3)]


def _turn(seq: int, text: str) -> TurnRecord:
    return TurnRecord(
        id=f"turn-{seq}",
        session_id="s",
        org="acme",
        user="ann",
        seq=seq,
        instruction=text,
        status="completed",
        messages=[{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}],
    )


async def test_turns_left_out_of_a_failed_summary_are_counted_and_folded_next_time() -> None:
    budget = ContextBudget(20_000, strategy="summarize", counter=EstimatedTokens())
    turns = [_turn(n, f"T{n} short") for n in range(1, 12)]
    summary = {
        "text": "SUMMARY covers T1 T2",
        "throughTurnId": "turn-2",
        "throughSeq": 2,
        "turns": 2,
    }
    turns[1].context_summary = summary
    window = turns[-4:]  # T8..T11: T3..T7 left the window since the summary
    reads: list[tuple[int, int]] = []

    async def older(after: int, before: int) -> Sequence[TurnRecord]:
        reads.append((after, before))
        return [t for t in turns if after < t.seq < before]

    failing = FunctionModel(lambda request: (_ for _ in ()).throw(LlmError("summary down")))
    record = TurnRecord(
        id="turn-12",
        session_id="s",
        org="acme",
        user="ann",
        seq=12,
        instruction="T12",
        messages=[{"role": "user", "content": "T12"}],
    )
    record.context_summary = dict(summary)
    system = {"role": "system", "content": "sys"}
    messages = await budget.prepare(record, system, window, (), failing, older=older)
    assert reads == [(2, 8)]
    summary_sent, kept = _coverage(
        LlmRequest(messages=(*messages, {"role": "user", "content": ""}))
    )
    assert summary_sent == [1, 2]
    assert kept == [8, 9, 10, 11, 12]
    # T3..T7 were not sent and are not in the summary: counted as dropped, with a warning.
    assert record.context_dropped == {"turns": 7, "throughTurnId": "turn-7", "summarized": 2}
    assert any("Could not summarize 5 earlier turn(s)" in w for w in record.warnings)
    # The next attempt folds them (and one turn of the window ahead of them).
    working = FunctionModel(_answer)
    record.warnings.clear()
    messages = await budget.prepare(record, system, window, (), working, older=older)
    summary_sent, kept = _coverage(
        LlmRequest(messages=(*messages, {"role": "user", "content": ""}))
    )
    assert summary_sent == [1, 2, 3, 4, 5, 6, 7, 8]
    assert kept == [9, 10, 11, 12]
    assert record.context_dropped == {"turns": 8, "throughTurnId": "turn-8", "summarized": 8}
    assert record.context_summary is not None
    assert record.context_summary["throughSeq"] == 8
    assert not record.warnings


async def test_turns_beyond_what_is_read_are_named_in_a_warning() -> None:
    # A session that ran under drop: 30 turns older than the window, no summary yet; the
    # turn reads at most a window's worth (4) of them.
    budget = ContextBudget(20_000, strategy="summarize", counter=EstimatedTokens())
    turns = [_turn(n, f"T{n} short") for n in range(1, 35)]
    window = turns[-4:]  # T31..T34

    async def older(after: int, before: int) -> Sequence[TurnRecord]:
        return [t for t in turns if after < t.seq < before][-4:]

    record = TurnRecord(
        id="turn-35",
        session_id="s",
        org="acme",
        user="ann",
        seq=35,
        instruction="T35",
        messages=[{"role": "user", "content": "T35"}],
    )
    system = {"role": "system", "content": "sys"}
    messages = await budget.prepare(record, system, window, (), FunctionModel(_answer), older=older)
    summary_sent, kept = _coverage(
        LlmRequest(messages=(*messages, {"role": "user", "content": ""}))
    )
    assert summary_sent == [27, 28, 29, 30, 31]
    assert kept == [32, 33, 34, 35]
    assert record.warnings == [
        "26 earlier turn(s) had left the history window (APTIX_HISTORY_TURNS) before a summary "
        "took them: they are neither sent nor summarized."
    ]
    # Those never read are counted too: no turn before the oldest sent was sent (review r7 F3).
    assert record.context_dropped == {"turns": 31, "throughTurnId": "turn-31", "summarized": 5}


async def test_under_drop_turns_older_than_the_window_are_not_read_but_counted() -> None:
    budget = ContextBudget(20_000, strategy="drop", counter=EstimatedTokens())
    turns = [_turn(n, f"T{n} short") for n in range(1, 12)]
    reads: list[tuple[int, int]] = []

    async def older(after: int, before: int) -> Sequence[TurnRecord]:
        # Only the newest turn left out, for the id contextDropped names (review r7 F3).
        assert before - after == 2, "read under drop"
        reads.append((after, before))
        return [t for t in turns if after < t.seq < before]

    record = TurnRecord(
        id="turn-12",
        session_id="s",
        org="acme",
        user="ann",
        seq=12,
        instruction="T12",
        messages=[{"role": "user", "content": "T12"}],
    )
    system = {"role": "system", "content": "sys"}
    await budget.prepare(record, system, turns[-4:], (), FunctionModel(_answer), older=older)
    assert reads in ([], [(6, 8)])  # none when this process remembers it
    assert record.context_dropped == {"turns": 7, "throughTurnId": "turn-7", "summarized": 0}
