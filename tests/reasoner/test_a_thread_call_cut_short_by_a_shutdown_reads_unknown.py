"""A thread call the process's shutdown cut short reads ``unknown``, not "it may still complete".

Review r7 F2 (round 72): SIGTERM past the drain recorded a blocking (thread) tool still running
``abandoned``, "it may still complete", and told the model so; but the process exits right
after, and its worker threads (daemon threads) with it: the call will not complete. It reads
``unknown`` now, as any call a shutdown stops: it may have partly taken effect, and it is not
run again unless its tool is idempotent. A cancel, after which the process lives on and the
thread may finish, still leaves it ``abandoned``.
"""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

import aptix
from aptix.reasoner import TurnResult, stopping
from aptix.reasoner.call_states import CANCELLED_THREAD, SHUT_DOWN_RUNNING
from aptix.testing import ScriptedModel, call, reply
from tests.databases import on_both_databases
from tests.reasoner.conftest import Harness

settings = pytest.fixture(on_both_databases, name="settings")

STARTED = threading.Event()
RELEASE = threading.Event()


@aptix.tool(usage="Copies the files, in a thread.")
def copy_files() -> str:
    """Blocks its thread until the test lets it go."""
    STARTED.set()
    RELEASE.wait(30)
    return "copied"


@pytest.fixture(autouse=True)
def _tool(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness.runtime.executor, "_guard", None)  # offered below, not by a mode
    monkeypatch.setattr(stopping, "_PROCESS", {"stopping": False})
    harness.runtime.registry.register(copy_files)
    STARTED.clear()
    RELEASE.clear()


def _start(harness: Harness) -> tuple[asyncio.Task[TurnResult], ScriptedModel]:
    model = ScriptedModel()
    model.add(reply(None, call("copy_files", {}, id="c1")), reply("Copied."))
    reasoner = harness.runtime.reasoner(model)
    reasoner._offered = lambda _w, mode_tools, _o: [*mode_tools, "copy_files"]
    running = asyncio.ensure_future(
        reasoner.execute(session_id=harness.session_id, org="acme", user="ann", instruction="go")
    )
    return running, model


async def _stopped_call(harness: Harness) -> dict[str, object]:
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    [entry] = turn.tool_calls
    return entry


async def test_a_thread_call_a_shutdown_cut_short_reads_unknown_and_the_model_is_told_so(
    harness: Harness,
) -> None:
    running, _ = _start(harness)
    try:
        await asyncio.wait_for(asyncio.to_thread(STARTED.wait, 30), 30)
        stopping.stop_process()
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        entry = await _stopped_call(harness)
    finally:
        RELEASE.set()  # the thread a real process's exit ends
    assert (entry["state"], entry["outcome"]) == ("unknown", "unknown")
    assert entry["errorMessage"] == SHUT_DOWN_RUNNING
    assert "may still complete" not in str(entry["errorMessage"])
    assert entry["lost"] is True  # as a crash leaves it
    stopping._PROCESS["stopping"] = False  # the restarted process
    harness.model.add(reply("Back."))
    await harness.reasoner.execute(
        session_id=harness.session_id, org="acme", user="ann", instruction="did it copy?"
    )
    told = [m for m in harness.model.requests[-1].messages if m.get("role") == "tool"]
    assert [json.loads(m["content"]) for m in told] == [{"error": SHUT_DOWN_RUNNING}]


async def test_a_thread_call_a_cancel_cut_short_is_still_abandoned(harness: Harness) -> None:
    # The process lives on, and so does the thread: the call may still complete.
    running, _ = _start(harness)
    try:
        await asyncio.wait_for(asyncio.to_thread(STARTED.wait, 30), 30)
        [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
        assert await harness.runtime.reasoner(harness.model).stop(turn.id)
        assert (await running).kind == "cancelled"
        entry = await _stopped_call(harness)
    finally:
        RELEASE.set()
    assert (entry["outcome"], entry["errorMessage"]) == ("abandoned", CANCELLED_THREAD)
