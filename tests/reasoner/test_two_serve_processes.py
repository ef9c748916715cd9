"""Two real ``aptix serve`` processes on one PostgreSQL database: takeover and cancel.

Process A runs a slow call with a side effect (tests/reasoner/slow_side_effect.py, loaded
with ``APTIX_TOOL_MODULES``); process B takes the turn over (A frozen with SIGSTOP until its
lease ran out, the same request posted to B) or cancels it. Leases are 3 s, so each
heartbeat comes a second after the last.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from aptix.reasoner.call_states import CANCELLED_RUNNING
from aptix.reasoner.endings import TAKEN_OVER
from aptix.testing import call, reply
from aptix.testing.server import Hold, ScriptedOpenAIServer
from tests.api.test_turns_live import Server, aptix_serve
from tests.databases import create_pg_database, drop_pg_database

HERE = Path(__file__).parent
LEASE = 3.0


@dataclass
class Pair:
    """The scripted model and the two processes, A and B, with the file of side effects."""

    llm: ScriptedOpenAIServer
    a: Server
    b: Server
    side: Path

    def lines(self) -> list[str]:
        return self.side.read_text().splitlines() if self.side.exists() else []


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """Both processes, started once for the module's tests (each test has its own session)."""
    tmp = tmp_path_factory.mktemp("two")
    url = create_pg_database()  # fails, never skips, without PostgreSQL
    side = tmp / "side.log"
    try:
        with ScriptedOpenAIServer() as llm:
            env = {
                "APTIX_LLM_BASE_URL": llm.base_url,
                "APTIX_DATABASE_URL": url,
                "APTIX_TURN_LEASE_SECONDS": str(LEASE),
                "APTIX_TOOL_MODULES": json.dumps([str(HERE / "slow_side_effect.py")]),
                "SIDE_LOG": str(side),
            }
            with (
                aptix_serve(tmp / "a", tmp / "a.log", **env) as a,
                aptix_serve(tmp / "b", tmp / "b.log", **env) as b,
            ):
                yield Pair(llm, a, b, side)
    finally:
        drop_pg_database(url)


def _wait_for(predicate: Callable[[], bool], what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _in_background(url: str, body: dict[str, Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """Post ``body`` to ``url``'s execute route from a thread; its answer lands in the dict."""
    out: dict[str, Any] = {}

    def post() -> None:
        try:
            answer = httpx.post(f"{url}/v1/agent/execute", json=body, timeout=90)
        except httpx.HTTPError as exc:  # the server stopped under it: the test says so
            out["failed"] = repr(exc)
            return
        out["status"], out["body"], out["at"] = answer.status_code, answer.json(), time.monotonic()

    thread = threading.Thread(target=post, daemon=True)
    thread.start()
    return thread, out


def _turn(url: str, sid: str) -> dict[str, Any]:
    turn: dict[str, Any] = httpx.get(f"{url}/v1/sessions/{sid}", timeout=30).json()["turns"][-1]
    return turn


def _call(calls: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    [found] = [c for c in calls if c["callId"] == call_id]
    return found


def test_a_call_ending_on_a_process_whose_turn_was_taken_over_is_recorded_and_told(
    pair: Pair,
) -> None:
    llm, a, b = pair.llm, pair.a, pair.b
    sid = httpx.post(f"{a.url}/v1/sessions", json={}).json()["sessionId"]
    llm.add(reply(None, call("request_user_approval", {"prompt": "Write?"}, id="u1")))
    handed = httpx.post(
        f"{a.url}/v1/agent/execute", json={"sessionId": sid, "instruction": "write"}, timeout=30
    ).json()
    assert handed["kind"] == "tool-only", handed
    resume = {"sessionId": sid, "toolResults": [{"callId": "u1", "result": {"approved": True}}]}
    llm.add(reply(None, call("slow_write", {"mark": "t1", "seconds": 4}, id="w1")))
    on_a, answer_a = _in_background(a.url, resume)
    _wait_for(lambda: "start t1" in pair.lines(), "the call to start on A")
    os.kill(a.process.pid, signal.SIGSTOP)  # A freezes mid-call; its lease runs out
    try:
        time.sleep(LEASE + 1.5)
        llm.add(Hold(reply("B's answer")))
        asked = len(llm.requests) + 1
        on_b, answer_b = _in_background(b.url, resume)  # the same request, retried on B
        _wait_for(lambda: len(llm.requests) >= asked, "B's model request")
        assert _call(_turn(b.url, sid)["toolCalls"], "w1")["outcome"] == "unknown"
    finally:
        os.kill(a.process.pid, signal.SIGCONT)
    on_a.join(30)
    # A's call ends after B took the turn: A says so, with the call's true outcome.
    assert answer_a["status"] == 200, answer_a
    assert (answer_a["body"]["kind"], answer_a["body"]["error"]) == ("error", TAKEN_OVER)
    written = _call(answer_a["body"]["toolCalls"], "w1")
    assert (written["outcome"], written["resultJson"]) == ("succeeded", '"written t1"')
    # On record at once, while B still runs the turn.
    now = _turn(b.url, sid)
    assert (now["status"], _call(now["toolCalls"], "w1")["outcome"]) == ("running", "succeeded")
    llm.release()
    on_b.join(30)
    assert (answer_b["body"]["kind"], answer_b["body"]["text"]) == ("ok", "B's answer")
    assert _call(answer_b["body"]["toolCalls"], "w1")["outcome"] == "succeeded"
    for url in (a.url, b.url):
        final = _turn(url, sid)
        assert final["status"] == "completed"
        assert _call(final["toolCalls"], "w1")["resultJson"] == '"written t1"'
    assert [line for line in pair.lines() if line.endswith("t1")] == ["start t1", "end t1"]


def test_a_cancel_sent_to_the_other_process_stops_the_running_call(pair: Pair) -> None:
    llm, a, b = pair.llm, pair.a, pair.b
    sid = httpx.post(f"{a.url}/v1/sessions", json={}).json()["sessionId"]
    llm.add(reply(None, call("slow_write", {"mark": "c1", "seconds": 15}, id="w1")))
    on_a, answer_a = _in_background(a.url, {"sessionId": sid, "instruction": "write"})
    _wait_for(lambda: "start c1" in pair.lines(), "the call to start on A")
    turn_id = _turn(b.url, sid)["turnId"]
    cancelled = httpx.post(f"{b.url}/v1/sessions/{sid}/turns/{turn_id}/cancel", timeout=30)
    asked = time.monotonic()
    assert (cancelled.status_code, cancelled.json()["status"]) == (200, "cancelled")
    on_a.join(LEASE / 3 + 5)
    # A stopped the call within a heartbeat (a third of the lease), as a cancel sent to A would.
    assert answer_a.get("at", float("inf")) - asked < LEASE / 3 + 2, answer_a
    assert answer_a["body"]["kind"] == "cancelled"
    stopped = _call(answer_a["body"]["toolCalls"], "w1")
    assert (stopped["outcome"], stopped["errorMessage"]) == ("unknown", CANCELLED_RUNNING)
    _wait_for(
        lambda: _turn(b.url, sid)["toolCalls"][0]["errorMessage"] == CANCELLED_RUNNING, "A's merge"
    )
    record = _turn(b.url, sid)
    assert (record["status"], record["toolCalls"][0]["outcome"]) == ("cancelled", "unknown")
    time.sleep(1)
    assert [line for line in pair.lines() if line.endswith("c1")] == ["start c1"]  # never ended
