"""A call left running by a turn closed without its process says what happened, in every case.

Review r6 (round 67) F1, and review r3's note: the call read "The server stopped while this
call ran" after ``kill -9`` of ``aptix chat`` (no server involved) and after a takeover once
the lease of a live process ran out during a database outage (nothing stopped). The words
now fit both, for the call, the turn's warning and the note the model reads.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest

from aptix.db.types import utc_now
from aptix.reasoner import claims
from aptix.reasoner.context import ending_note
from aptix.reasoner.record import TurnRecord


def _running(owner: str, *, lease_left: float) -> TurnRecord:
    call = {"id": "n1", "type": "function", "function": {"name": "nap", "arguments": "{}"}}
    return TurnRecord(
        id="t",
        session_id="s",
        org="acme",
        user="ann",
        seq=1,
        instruction="nap",
        messages=[
            {"role": "user", "content": "nap"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
        ],
        tool_calls=[
            {
                "callId": "n1",
                "name": "nap",
                "argumentsJson": "{}",
                "state": "started",
                "outcome": "pending",
                "iteration": 1,
            }
        ],
        lease_until=utc_now() + timedelta(seconds=lease_left),
        owner=owner,
    )


def _dead_pid() -> int:
    """The pid of a process of this host that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.parametrize(
    "case",
    ["its process was killed (aptix chat, kill -9)", "its lease ran out (a live process)"],
)
def test_the_lost_call_and_the_turn_name_no_server(case: str) -> None:
    if case.startswith("its process"):
        turn = _running(f"{claims._HOST}:{_dead_pid()}:run", lease_left=30)
    else:  # another machine's process, alive, that could not renew its lease
        turn = _running("elsewhere:4242:run", lease_left=-1)
    assert claims.mark_dead(turn, utc_now())
    [entry] = turn.tool_calls
    assert (turn.status, entry["outcome"]) == ("interrupted", "unknown")
    told = " ".join([entry["errorMessage"], *turn.warnings, str(ending_note(turn))])
    assert "server" not in told.lower()
    assert entry["errorMessage"].startswith(
        "The process running this turn stopped, or lost contact with the database for longer "
        "than the turn's lease, while this call ran"
    )
    assert "was not run again" in entry["errorMessage"]
