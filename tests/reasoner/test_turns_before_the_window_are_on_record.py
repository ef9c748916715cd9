"""Turns older than the ``APTIX_HISTORY_TURNS`` window are on the turn's record as left out.

Review r7 F3 (round 73): under ``drop``, a turn whose request held only the last
``APTIX_HISTORY_TURNS`` earlier turns had ``contextDropped: null``, so the session's reader was
told the model saw the whole conversation. ``contextDropped`` now counts every earlier turn
not sent whole (by ``seq``: a session's turns are numbered without holes) and names the newest
of them; that one is read for its id only when this process does not remember it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

import httpx

from aptix.api import create_app
from aptix.llm.types import LlmRequest
from aptix.reasoner.context import ContextBudget, EstimatedTokens
from aptix.reasoner.record import TurnRecord
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, reply


def _instructions(request: LlmRequest) -> list[str]:
    return [str(m["content"]) for m in request.messages if m["role"] == "user"]


async def test_turns_left_out_of_the_window_are_counted_and_named(
    tmp_path: Path, database_url: str
) -> None:
    settings = AptixSettings(
        data_dir=tmp_path, database_url=database_url, load_plugins=False, history_turns=2
    )
    model = FunctionModel(lambda request: reply("ok"))
    async with open_runtime(settings) as runtime:
        app = create_app(runtime=runtime, model=model)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            created = (await client.post("/v1/sessions", json={})).json()
            for n in range(1, 6):
                answered = await client.post(
                    "/v1/agent/execute",
                    json={"sessionId": created["sessionId"], "instruction": f"turn {n}"},
                )
                assert answered.status_code == 200, answered.text
                sent = _instructions(model.requests[-1])
                assert sent == [f"turn {k}" for k in range(max(1, n - 2), n + 1)]
            shown = await client.get(f"/v1/sessions/{created['sessionId']}")
    assert shown.status_code == 200, shown.text
    turns = shown.json()["turns"]
    assert [t["contextDropped"] for t in turns[:3]] == [None, None, None]
    for n in (4, 5):  # turn n was sent turns n-2 and n-1: turns 1 to n-3 were left out
        assert turns[n - 1]["contextDropped"] == {
            "turns": n - 3,
            "throughTurnId": turns[n - 4]["turnId"],
            "summarized": 0,
            "summary": None,
        }


async def test_with_no_window_every_earlier_turn_is_left_out(tmp_path: Path) -> None:
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, history_turns=0)
    model = FunctionModel(lambda request: reply("ok"))
    async with open_runtime(settings) as runtime:
        created = await runtime.services.sessions.create_session(org="acme", user="ann")
        assert created.result is not None
        reasoner = runtime.reasoner(model)
        for n in range(1, 4):
            await reasoner.execute(
                session_id=created.result.id, org="acme", user="ann", instruction=f"turn {n}"
            )
            assert _instructions(model.requests[-1]) == [f"turn {n}"]
        turns = await runtime.turns.list_turns(created.result.id, "acme")
    assert [t.context_dropped for t in turns] == [
        None,
        {"turns": 1, "throughTurnId": turns[0].id, "summarized": 0},
        {"turns": 2, "throughTurnId": turns[1].id, "summarized": 0},
    ]


def _turn(session_id: str, seq: int) -> TurnRecord:
    return TurnRecord(
        id=f"{session_id}-{seq}",
        session_id=session_id,
        org="acme",
        user="ann",
        seq=seq,
        instruction=f"T{seq}",
        status="completed",
        messages=[{"role": "user", "content": f"T{seq}"}, {"role": "assistant", "content": "ok"}],
    )


async def test_the_newest_turn_left_out_is_read_once_for_its_id() -> None:
    budget = ContextBudget(20_000, strategy="drop", counter=EstimatedTokens())
    session_id = uuid.uuid4().hex
    turns = [_turn(session_id, n) for n in range(1, 14)]
    reads: list[tuple[int, int]] = []

    async def older(after: int, before: int) -> Sequence[TurnRecord]:
        reads.append((after, before))
        return [t for t in turns if after < t.seq < before][-1:]

    system = {"role": "system", "content": "sys"}
    model = FunctionModel(lambda request: reply("no summary under drop"))
    for seq in (12, 13):
        record = _turn(session_id, seq)
        record.status = "running"
        window = turns[seq - 5 : seq - 1]  # the 4 turns before it
        await budget.prepare(record, system, window, (), model, older=older)
        assert record.context_dropped == {
            "turns": seq - 5,
            "throughTurnId": f"{session_id}-{seq - 5}",
            "summarized": 0,
        }
    # Turn 12 reads turn 7 (just before its window); turn 13 needs turn 8, the oldest turn of
    # turn 12's window, which this process remembers.
    assert reads == [(6, 8)]
    assert model.requests == []
