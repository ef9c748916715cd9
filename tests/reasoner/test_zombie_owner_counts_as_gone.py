"""A turn whose process on this host exited but was never reaped (a zombie) is not running.

Where PID 1 does not reap (a container without an init), a killed ``aptix serve`` stays a
zombie: it still answers signal 0, but it runs nothing. The next claim marks its turn
``interrupted`` at once instead of answering ``session_busy`` until the lease runs out.
"""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import timedelta

from sqlalchemy import update

from aptix.db.types import utc_now
from aptix.reasoner.claims import OWNER, Lease, start_plan
from aptix.reasoner.record import TurnRecord
from aptix.reasoner.tables import TurnRow
from aptix.testing import reply
from tests.reasoner.conftest import Harness


def _zombie() -> subprocess.Popen[bytes]:
    """A child process that has exited and that nobody has reaped yet."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    for _ in range(200):
        with open(f"/proc/{child.pid}/stat", "rb") as stat:
            if stat.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                return child
        time.sleep(0.05)
    raise AssertionError("the child did not exit")


def _running_turn(owner: str) -> TurnRecord:
    return TurnRecord(
        id="t1",
        session_id="s",
        org="acme",
        user="ann",
        seq=1,
        instruction="slow",
        lease_until=utc_now() + timedelta(minutes=5),  # the lease alone says alive
        owner=owner,
    )


def test_a_turn_of_a_zombie_process_is_interrupted_by_the_next_claim() -> None:
    child = _zombie()
    try:
        host = OWNER.partition(":")[0]
        latest = _running_turn(f"{host}:{child.pid}:deadbeef")
        decide = start_plan(
            session_id="s", org="acme", user="ann", instruction="next", lease=Lease(), turn_id="t2"
        )
        plan = decide(latest)
    finally:
        child.wait()
    assert plan.run is not None
    assert plan.run.id == "t2"
    assert plan.closed is latest
    assert latest.status == "interrupted"


async def test_the_next_instruction_runs_at_once_after_a_zombie_held_the_turn(
    harness: Harness,
) -> None:
    harness.model.add(reply("First."), reply("Second."))
    await harness.reasoner.execute(
        session_id=harness.session_id, org="acme", user="ann", instruction="one"
    )
    child = _zombie()
    try:
        # As a killed process left it: running, its lease still good for minutes.
        async with harness.runtime.database.transaction() as tx:
            await tx.execute(
                update(TurnRow).values(
                    status="running",
                    owner=f"{OWNER.partition(':')[0]}:{child.pid}:x",
                    lease_until=utc_now() + timedelta(minutes=5),
                )
            )
        answer = await harness.reasoner.execute(
            session_id=harness.session_id, org="acme", user="ann", instruction="two"
        )
    finally:
        child.wait()
    assert answer.text == "Second."
    first, _ = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert first.status == "interrupted"
