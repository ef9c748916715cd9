"""The same ``toolResults`` posted again, streamed: the stored answer arrives as events.

Against a real ``aptix serve``. docs/http-api.md promises that posting the results after the
turn answered returns the same answer, and that a stream ends with ``turn_finished``
carrying the JSON answer's body. A streamed repeat used to be an empty stream: a tab left
behind (another tab had answered the approval) never learnt how the turn had ended.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from aptix.testing import call, reply
from aptix.testing.server import Step
from tests.api.live import serve_scripted

#: Holds the model's answer to the second approval of "ask slowly" until the test sets it.
_slow_gate = threading.Event()


def _respond(body: dict[str, Any]) -> Step:
    last = body["messages"][-1]
    if last["role"] == "tool":
        called = str(last.get("tool_call_id"))
        if called.startswith("slow-1"):
            return reply(
                "One more.", call("request_user_approval", {"prompt": "Sure?"}, id="slow-2")
            )
        if called.startswith("slow-2"):
            _slow_gate.wait(60)
            return reply("You approved.")
        if called.startswith("twice-1"):
            # One approval answered, the model asks for a second one: a hand-off again.
            again = call("request_user_approval", {"prompt": "Sure?"}, id="twice-2")
            return reply("One more.", again)
        approved = json.loads(last["content"]).get("approved") is True
        return reply("You approved." if approved else "You denied.")
    if last.get("content") == "ask twice":
        return reply(None, call("request_user_approval", {"prompt": "Go?"}, id="twice-1"))
    if last.get("content") == "ask slowly":
        return reply(None, call("request_user_approval", {"prompt": "Go?"}, id="slow-1"))
    return reply("Asking.", call("request_user_approval", {"prompt": "Go?"}, id="ask-1"))


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve_scripted(tmp_path_factory.mktemp("replay"), _respond) as url:
        yield url


def _events(answer: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    """The Server-Sent Events of ``answer``, as (event, data)."""
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/event-stream")
    events: list[tuple[str, dict[str, Any]]] = []
    for block in answer.text.replace("\r\n", "\n").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            events.append((fields["event"], json.loads(fields["data"])))
    return events


def _post(url: str, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(f"{url}/v1/agent/execute", json=body, headers=headers, timeout=60)


def _handed_off(url: str, instruction: str) -> str:
    handed = _post(url, {"instruction": instruction}).json()
    assert handed["kind"] == "tool-only", handed
    return str(handed["sessionId"])


def test_the_same_results_streamed_again_end_with_the_stored_answer(url: str) -> None:
    sid = _handed_off(url, "ask me")
    answers = [{"callId": "ask-1", "result": {"approved": True}}]
    resume = {"sessionId": sid, "toolResults": answers}
    answered = _post(url, resume).json()
    assert answered["text"] == "You approved."
    for streamed in (
        _post(url, {**resume, "stream": True}),
        _post(url, resume, Accept="text/event-stream"),
    ):
        events = _events(streamed)
        assert events == [("text", {"text": "You approved."}), ("turn_finished", answered)]
    assert _post(url, resume).json() == answered  # and as JSON, still the same


def test_a_late_answer_to_an_answered_approval_streams_the_answer_that_won(url: str) -> None:
    """The tab left behind denies what another tab approved: the first answer stands."""
    sid = _handed_off(url, "ask me")
    first = [{"callId": "ask-1", "result": {"approved": True}}]
    answered = _post(url, {"sessionId": sid, "toolResults": first}).json()
    late = [{"callId": "ask-1", "result": {"approved": False}}]
    events = _events(_post(url, {"sessionId": sid, "toolResults": late, "stream": True}))
    assert events[-1] == ("turn_finished", answered)
    assert events[-1][1]["text"] == "You approved."
    [turn] = httpx.get(f"{url}/v1/sessions/{sid}").json()["turns"]
    assert turn["status"] == "completed"
    assert [c.get("clientResult") for c in turn["toolCalls"]] == ['{"approved": true}']


def test_a_resume_that_handed_off_again_streams_its_pending_calls_again(url: str) -> None:
    sid = _handed_off(url, "ask twice")
    resume = {
        "sessionId": sid,
        "toolResults": [{"callId": "twice-1", "result": {"approved": True}}],
    }
    live = dict(_events(_post(url, {**resume, "stream": True})))
    assert live["turn_finished"]["kind"] == "tool-only"
    [pending] = live["client_calls_pending"]["toolCalls"]
    assert pending["callId"] == "twice-2"
    events = _events(_post(url, {**resume, "stream": True}))
    assert events == [
        ("text", {"text": "One more."}),
        ("client_calls_pending", live["client_calls_pending"]),
        ("turn_finished", live["turn_finished"]),
    ]
    assert _post(url, resume).json() == live["turn_finished"]


def _resume(sid: str, call_id: str, approved: bool = True) -> dict[str, Any]:
    return {
        "sessionId": sid,
        "toolResults": [{"callId": call_id, "result": {"approved": approved}}],
    }


def test_the_first_results_again_after_the_turn_moved_on_tell_how_it_ended(url: str) -> None:
    """Not the hand-off they got (a second approval, answered since): the final answer."""
    sid = _handed_off(url, "ask twice")
    first = _resume(sid, "twice-1")
    handed = _post(url, first).json()
    assert [c["callId"] for c in handed["toolCalls"] if c.get("requiresClientExecution")] == [
        "twice-2"
    ]
    final = _post(url, _resume(sid, "twice-2", approved=False)).json()
    assert (final["kind"], final["text"]) == ("ok", "You denied.")
    assert _post(url, first).json() == final
    events = _events(_post(url, {**first, "stream": True}))
    assert events == [("text", {"text": "You denied."}), ("turn_finished", final)]
    [turn] = httpx.get(f"{url}/v1/sessions/{sid}").json()["turns"]
    assert (turn["status"], turn["pendingCalls"]) == ("completed", [])


def test_the_first_results_again_after_a_cancel_say_the_turn_was_cancelled(url: str) -> None:
    sid = _handed_off(url, "ask twice")
    first = _resume(sid, "twice-1")
    turn_id = _post(url, first).json()["turnId"]
    cancel = httpx.post(f"{url}/v1/sessions/{sid}/turns/{turn_id}/cancel", timeout=30)
    assert cancel.status_code == 200, cancel.text
    replayed = _post(url, first).json()
    assert (replayed["kind"], replayed["text"]) == ("cancelled", "One more.")
    assert all(c["outcome"] != "pending" for c in replayed["toolCalls"]), replayed
    events = _events(_post(url, {**first, "stream": True}))
    assert [e for e, _ in events] == ["text", "turn_finished"]
    assert events[-1][1] == replayed


def test_the_first_results_again_while_a_later_resume_runs_are_409_turn_moved_on(
    url: str,
) -> None:
    sid = _handed_off(url, "ask slowly")
    first = _resume(sid, "slow-1")
    assert _post(url, first).json()["kind"] == "tool-only"
    later: list[httpx.Response] = []
    running = threading.Thread(target=lambda: later.append(_post(url, _resume(sid, "slow-2"))))
    running.start()
    try:
        for _ in range(200):  # until the second resume has claimed the turn
            [turn] = httpx.get(f"{url}/v1/sessions/{sid}").json()["turns"]
            if turn["status"] == "running":
                break
            time.sleep(0.05)
        for refused in (_post(url, first), _post(url, {**first, "stream": True})):
            assert refused.status_code == 409, refused.text
            assert refused.json()["error"]["code"] == "turn_moved_on"
    finally:
        _slow_gate.set()
        running.join(60)
    [final] = later
    assert final.json()["text"] == "You approved."
    assert _post(url, first).json() == final.json()
