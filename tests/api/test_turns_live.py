"""Turns against real ``aptix serve`` processes.

kill -9 mid-turn and mid-resume, a dropped stream, and two servers on one PostgreSQL database
hammered on the same sessions.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from aptix.testing import call, reply
from aptix.testing.server import Delay, ScriptedOpenAIServer, Step
from tests.api.live import serve_isolated
from tests.databases import create_pg_database, drop_pg_database


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]


@contextmanager
def aptix_serve(data_dir: Path, log: Path, **env: str) -> Iterator[Server]:
    """``aptix serve`` on a free port and a scripted model, its output in ``log``."""
    scripted = {"APTIX_LLM_MODEL": "scripted", "APTIX_LLM_MAX_RETRIES": "0", **env}
    with serve_isolated(data_dir, log, **scripted) as (url, process):
        yield Server(url, process)


def _wait_for(predicate: Any, what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_kill_9_while_the_model_thinks_after_a_tool_ran(tmp_path: Path) -> None:
    change = {"mode": "calculation", "branch": False, "reason": "numbers"}
    with ScriptedOpenAIServer() as llm:
        llm.add(reply(None, call("agent_change_mode", change, id="m1")), Delay(60, reply("late")))
        env = {"APTIX_LLM_BASE_URL": llm.base_url}
        log = tmp_path / "serve.log"
        with aptix_serve(tmp_path, log, **env) as first:
            sid = httpx.post(f"{first.url}/v1/sessions", json={}).json()["sessionId"]

            def ask() -> None:
                with contextlib.suppress(httpx.HTTPError):  # the server dies under it
                    httpx.post(
                        f"{first.url}/v1/agent/execute",
                        json={"sessionId": sid, "instruction": "switch"},
                        timeout=90,
                    )

            asker = threading.Thread(target=ask)
            asker.start()
            _wait_for(lambda: len(llm.requests) == 2, "the second model request")
            first.process.send_signal(signal.SIGKILL)
            first.process.wait(timeout=20)
            asker.join(timeout=30)
        llm.add(reply("Next one works."))
        with aptix_serve(tmp_path, log, **env) as second:
            shown = httpx.get(f"{second.url}/v1/sessions/{sid}").json()
            [turn] = shown["turns"]
            assert turn["status"] == "interrupted"
            assert [(c["callId"], c["wasExecuted"]) for c in turn["toolCalls"]] == [("m1", True)]
            # The tool's committed effect is there, once.
            assert shown["mode"] == "calculation"
            assert [h["mode"] for h in shown["modeHistory"]] == ["calculation"]
            answer = httpx.post(
                f"{second.url}/v1/agent/execute",
                json={"sessionId": sid, "instruction": "next"},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["text"] == "Next one works."
            assert len(llm.requests) == 3  # the mode change was not run again


def test_kill_9_during_a_resume_keeps_the_posted_results(tmp_path: Path) -> None:
    with ScriptedOpenAIServer() as llm:
        llm.add(
            reply(None, call("request_user_approval", {"prompt": "Go?"}, id="u1")),
            Delay(60, reply("late")),
        )
        env = {"APTIX_LLM_BASE_URL": llm.base_url}
        log = tmp_path / "serve.log"
        resume: dict[str, Any] = {"toolResults": [{"callId": "u1", "result": {"approved": True}}]}
        with aptix_serve(tmp_path, log, **env) as first:
            handed = httpx.post(
                f"{first.url}/v1/agent/execute", json={"instruction": "ask me"}, timeout=30
            ).json()
            assert handed["kind"] == "tool-only"
            resume["sessionId"] = handed["sessionId"]

            def post_resume() -> None:
                with contextlib.suppress(httpx.HTTPError):  # the server dies under it
                    httpx.post(f"{first.url}/v1/agent/execute", json=resume, timeout=90)

            poster = threading.Thread(target=post_resume)
            poster.start()
            _wait_for(lambda: len(llm.requests) == 2, "the resume's model request")
            first.process.send_signal(signal.SIGKILL)
            first.process.wait(timeout=20)
            poster.join(timeout=30)
        llm.add(reply("Approved and done."))
        with aptix_serve(tmp_path, log, **env) as second:
            retried = httpx.post(f"{second.url}/v1/agent/execute", json=resume, timeout=30)
            assert retried.status_code == 200, retried.text
            assert (retried.json()["kind"], retried.json()["text"]) == ("ok", "Approved and done.")
            tool_messages = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
            assert [(m["tool_call_id"], m["content"]) for m in tool_messages] == [
                ("u1", '{"approved": true}')
            ]
            again = httpx.post(f"{second.url}/v1/agent/execute", json=resume, timeout=30)
            assert again.json() == retried.json()
            [turn] = httpx.get(f"{second.url}/v1/sessions/{resume['sessionId']}").json()["turns"]
            assert turn["status"] == "completed"


def test_a_client_dropping_the_stream_cancels_the_turn(tmp_path: Path) -> None:
    with ScriptedOpenAIServer() as llm:
        llm.add(
            reply(None, call("agent_calculator", {"expression": "1+1"}, id="c1")),
            Delay(30, reply("late")),
        )
        with aptix_serve(tmp_path, tmp_path / "serve.log", APTIX_LLM_BASE_URL=llm.base_url) as s:
            sid = httpx.post(f"{s.url}/v1/sessions", json={}).json()["sessionId"]
            body = {"sessionId": sid, "instruction": "add", "stream": True}
            with httpx.stream("POST", f"{s.url}/v1/agent/execute", json=body, timeout=30) as r:
                assert r.status_code == 200
                for line in r.iter_lines():
                    if line == "event: tool_call_finished":
                        break

            def status() -> str:
                turns = httpx.get(f"{s.url}/v1/sessions/{sid}").json()["turns"]
                return str(turns[0]["status"])

            _wait_for(lambda: status() == "cancelled", "the turn to be cancelled", 15)
            [turn] = httpx.get(f"{s.url}/v1/sessions/{sid}").json()["turns"]
            assert [c["callId"] for c in turn["toolCalls"]] == ["c1"]


def test_a_cancel_mid_batch_keeps_the_finished_call_and_stops_the_other(tmp_path: Path) -> None:
    env = {
        "APTIX_TOOL_MODULES": json.dumps([str(Path(__file__).parent / "cancel_tools.py")]),
        "CANCEL_DIR": str(tmp_path),
    }
    with ScriptedOpenAIServer() as llm:
        llm.add(reply(None, call("pay", {"invoice": 42}, id="p1"), call("slow", {}, id="s1")))
        with aptix_serve(
            tmp_path, tmp_path / "serve.log", APTIX_LLM_BASE_URL=llm.base_url, **env
        ) as s:
            sid = httpx.post(f"{s.url}/v1/sessions", json={}).json()["sessionId"]
            body = {"sessionId": sid, "instruction": "pay 42, then wait"}
            with ThreadPoolExecutor(1) as pool:
                turn_answer = pool.submit(
                    httpx.post, f"{s.url}/v1/agent/execute", json=body, timeout=60
                )
                _wait_for((tmp_path / "slow-started").exists, "the slow call to start")
                [turn] = httpx.get(f"{s.url}/v1/sessions/{sid}").json()["turns"]
                started = time.monotonic()
                cancelled = httpx.post(
                    f"{s.url}/v1/sessions/{sid}/turns/{turn['turnId']}/cancel", timeout=30
                )
                waited = time.monotonic() - started
                answer = turn_answer.result(timeout=10).json()
    assert cancelled.status_code == 200, cancelled.text
    assert waited < 2, waited  # stopped at once, well under the 5 s bound
    shown = {c["callId"]: c for c in cancelled.json()["toolCalls"]}
    assert (shown["p1"]["outcome"], shown["p1"]["resultJson"]) == ("succeeded", '"paid 42"')
    assert shown["s1"]["outcome"] == "unknown"
    assert cancelled.json()["status"] == "cancelled"
    assert (answer["kind"], answer["turnId"]) == ("cancelled", turn["turnId"])
    assert {c["callId"]: c["outcome"] for c in answer["toolCalls"]} == {
        "p1": "succeeded",
        "s1": shown["s1"]["outcome"],
    }
    assert (tmp_path / "paid").read_text() == "42\n"  # paid once


def _responder(body: dict[str, Any]) -> Step:
    time.sleep(0.05)  # long enough for requests to overlap
    last = body["messages"][-1]
    content = str(last.get("content") or "")
    if last["role"] == "user" and content.startswith("approve "):
        tag = content.split()[1]
        return reply(None, call("request_user_approval", {"prompt": "ok?"}, id=f"u_{tag}"))
    return reply("done")


@pytest.fixture
def pg_url() -> Iterator[str]:
    url = create_pg_database()
    yield url
    drop_pg_database(url)


def test_two_servers_on_one_postgresql_never_run_a_turn_twice(tmp_path: Path, pg_url: str) -> None:
    with ScriptedOpenAIServer(respond=_responder) as llm:
        env = {"APTIX_LLM_BASE_URL": llm.base_url, "APTIX_DATABASE_URL": pg_url}
        with (
            aptix_serve(tmp_path / "a", tmp_path / "a.log", **env) as a,
            aptix_serve(tmp_path / "b", tmp_path / "b.log", **env) as b,
        ):
            urls = [a.url, b.url]
            sessions = [
                httpx.post(f"{a.url}/v1/sessions", json={}).json()["sessionId"] for _ in range(3)
            ]

            def post(i: int, body: dict[str, Any]) -> httpx.Response:
                return httpx.post(f"{urls[i % 2]}/v1/agent/execute", json=body, timeout=60)

            # Instructions: 8 at once per session, alternating between the two servers.
            jobs = [
                (i, {"sessionId": sid, "instruction": f"n{i}"})
                for sid in sessions
                for i in range(8)
            ]
            with ThreadPoolExecutor(16) as pool:
                answers = list(pool.map(lambda job: post(*job), jobs))
            codes = Counter(r.status_code for r in answers)
            assert codes[409] > 0  # the requests did overlap
            assert set(codes) <= {200, 409}, [
                r.text for r in answers if r.status_code not in (200, 409)
            ]
            assert all(
                r.json()["error"]["code"] == "session_busy" for r in answers if r.status_code == 409
            )
            ok = [r.json() for r in answers if r.status_code == 200]
            for sid in sessions:
                turns = httpx.get(f"{b.url}/v1/sessions/{sid}").json()["turns"]
                mine = [o for o in ok if o["sessionId"] == sid]
                assert sorted(t["turnId"] for t in turns) == sorted(o["turnId"] for o in mine)
                assert [t["seq"] for t in turns] == list(range(1, len(turns) + 1))
                assert all(t["status"] == "completed" for t in turns)
            assert len(llm.requests) == len(ok)  # one model call per turn that ran

            # Resumes: the same results posted 8 times at once, across both servers.
            before = len(llm.requests)
            for n, sid in enumerate(sessions):
                handed = post(n, {"sessionId": sid, "instruction": f"approve s{n}"}).json()
                assert handed["kind"] == "tool-only"
            resumes = [
                (i, {"sessionId": sid, "toolResults": [{"callId": f"u_s{n}", "result": "yes"}]})
                for n, sid in enumerate(sessions)
                for i in range(8)
            ]
            with ThreadPoolExecutor(16) as pool:
                answers = list(pool.map(lambda job: post(*job), resumes))
            assert {r.status_code for r in answers} <= {200, 409}
            for n, sid in enumerate(sessions):
                mine = [
                    r.json()
                    for r, (_, body) in zip(answers, resumes, strict=True)
                    if body["sessionId"] == sid and r.status_code == 200
                ]
                assert mine, "no resume of a session succeeded"
                assert all(m == mine[0] for m in mine)  # replays of the one outcome
                resumed = [
                    q
                    for q in llm.requests[before:]
                    if q["messages"][-1].get("tool_call_id") == f"u_s{n}"
                ]
                assert len(resumed) == 1  # the resume ran exactly once
