"""A process's cache of frozen turns takes bounded memory, however large its turns are.

Each process keeps the latest frozen turns of the sessions it served, so that a claim reads
only the newer rows. The cache was bounded at 20,000 turns, whatever they held: about 150 MB
of the few-KB turns of a soak (whose RSS grew 9 KB a turn for 7,000 turns), and gigabytes of
turns with long answers or tool results.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import tracemalloc
from types import SimpleNamespace

import pytest

from aptix.reasoner import sql_turns
from aptix.reasoner.record import TurnRecord
from aptix.reasoner.sql_turns import SqlTurnStore
from aptix.runtime import Runtime
from aptix.testing import ScriptedModel, reply

BUDGET = 1_000_000
ANSWER = "x" * 20_000  # a turn stores it twice (its message and its result): 40 KB


def _held(store: SqlTurnStore) -> int:
    """The stored size (JSON) of the turns ``store`` keeps in memory."""
    windows = store._windows.values()
    return sum(len(json.dumps(sql_turns._data(t), default=str)) for w in windows for t in w.turns)


async def _sessions(runtime: Runtime, count: int) -> str:
    """``count`` sessions of two long answers each (the second freezes the first); the last."""
    session_id = ""
    for _ in range(count):
        created = await runtime.services.sessions.create_session(org="acme", user="ann")
        assert created.result is not None
        session_id = created.result.id
        reasoner = runtime.reasoner(ScriptedModel.of(reply(ANSWER), reply(ANSWER)))
        for instruction in ("first", "second"):
            await reasoner.execute(
                session_id=session_id, org="acme", user="ann", instruction=instruction
            )
    return session_id


async def test_the_cached_turns_stay_within_the_budget_as_turns_go_on(runtime: Runtime) -> None:
    store = SqlTurnStore(runtime.database, cache_bytes=BUDGET)
    runtime = dataclasses.replace(runtime, turns=store)
    await _sessions(runtime, 20)
    after_20 = _held(store)
    last = await _sessions(runtime, 20)
    # 40 frozen turns of 40 KB were read; the cache keeps what fits, not all of them.
    assert 0 < _held(store) <= BUDGET
    assert after_20 <= BUDGET
    assert last in store._windows  # the session just served keeps its window


@pytest.mark.parametrize("text", ["short", "x" * 100_000])
def test_a_cached_turn_is_counted_at_about_what_it_takes_in_memory(text: str) -> None:
    turn = TurnRecord(
        id="t" * 32, session_id="s" * 32, org="acme", user="ann", seq=1, instruction="go",
        status="completed", text=text,
        messages=[{"role": "user", "content": "go"}, {"role": "assistant", "content": text}],
        result={"kind": "ok", "text": text, "toolCalls": [], "warnings": []},
    )  # fmt: skip
    data = json.dumps(sql_turns._data(turn), default=str)
    columns = {f.name: getattr(turn, f.name) for f in dataclasses.fields(turn)}
    row = SimpleNamespace(**columns, user_id="ann", data=None)
    gc.collect()
    tracemalloc.start()
    try:
        row.data = json.loads(data)  # as the database driver hands the JSON column over
        read = sql_turns._to_record(row)  # type: ignore[arg-type]
        taken = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert read.text == text
    assert taken / 2 <= sql_turns._footprint(read) <= taken * 2
