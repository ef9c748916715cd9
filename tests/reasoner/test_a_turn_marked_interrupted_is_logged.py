"""A turn found left running by a dead process is marked interrupted, and the log says so.

After ``kill -9`` (an OOM kill) the killed process's log just ends; the process that marks
its turns ``interrupted``, at start-up or when a request for the session finds one, writes
one WARNING per turn with its session, turn and org (review r6 F6), as outages are logged.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest
from sqlalchemy import update

from aptix.log_setup import LogContextFilter, PlainFormatter
from aptix.reasoner.claims import OWNER
from aptix.reasoner.tables import TurnRow
from aptix.testing import reply
from tests.reasoner.conftest import Harness

TAG = "[TurnStore_Turn__Interrupted]"


class Died(BaseException):
    """Stands in for kill -9 while the model answers: the turn stays running."""


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    """The ``aptix`` logger's lines as ``aptix serve`` writes them (plain text)."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(PlainFormatter())
    handler.addFilter(LogContextFilter("-"))
    logger = logging.getLogger("aptix")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield out
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


async def _killed_mid_turn(h: Harness) -> str:
    """A turn left running by a process of this host that is gone; its id."""
    h.model.add(Died())  # type: ignore[arg-type]
    with pytest.raises(Died):
        await h.reasoner.execute(session_id=h.session_id, org="acme", user="ann", instruction="go")
    host = OWNER.split(":")[0]
    async with h.runtime.database.transaction() as tx:
        await tx.execute(update(TurnRow).values(owner=f"{host}:{2**22 + 12345}:dead:run"))
    [turn] = await h.runtime.turns.list_turns(h.session_id, "acme")
    assert turn.status == "running"
    return turn.id


async def test_the_start_up_sweep_logs_each_turn_it_marks_interrupted(
    harness: Harness, lines: io.StringIO
) -> None:
    turn_id = await _killed_mid_turn(harness)
    assert await harness.runtime.turns.sweep() == 1
    [line] = [ln for ln in lines.getvalue().splitlines() if TAG in ln]
    assert " WARNING aptix" in line
    assert f"session_id={harness.session_id} turn_id={turn_id} org=acme" in line
    assert f"{2**22 + 12345}" in line  # which process left it: the owner recorded
    assert "interrupted" in line
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert turn.status == "interrupted"
    lines.truncate(0)
    assert await harness.runtime.turns.sweep() == 0  # once: it is no longer running
    assert TAG not in lines.getvalue()


async def test_a_request_that_finds_the_dead_turn_logs_it(
    harness: Harness, lines: io.StringIO
) -> None:
    turn_id = await _killed_mid_turn(harness)
    harness.model.add(reply("hello again"))
    result = await harness.reasoner.execute(
        session_id=harness.session_id, org="acme", user="ann", instruction="again"
    )
    assert result.kind == "ok"
    [line] = [ln for ln in lines.getvalue().splitlines() if TAG in ln]
    assert f"turn_id={turn_id} org=acme" in line
    [dead, _] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert dead.status == "interrupted"


async def test_a_live_turn_is_neither_marked_nor_logged(
    harness: Harness, lines: io.StringIO
) -> None:
    harness.model.add(Died())  # type: ignore[arg-type]
    with pytest.raises(Died):
        await harness.reasoner.execute(
            session_id=harness.session_id, org="acme", user="ann", instruction="go"
        )
    assert await harness.runtime.turns.sweep() == 0  # this process lives, its lease too
    assert TAG not in lines.getvalue()
