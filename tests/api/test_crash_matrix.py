"""The crash matrix (issue 19, DESIGN §14): kill -9 of a real ``aptix serve`` at each point of
a call's life, on SQLite and PostgreSQL, then the documented retry on a new process.

The side effects are counted durably (a line in a file per run of each call): ``charge`` is an
``@aptix.tool`` loaded with ``APTIX_TOOL_MODULES`` (tests/api/crash_tools.py), ``vault_wipe``
a destructive tool of a stdio MCP server (tests/api/crash_mcp.py) that the default approval
policy hands to the client first. Each kill is synchronised exactly: each call marks a file
when it reaches its point and waits there (tests/api/crash_gate.py), or the scripted model
holds its answer. After the retry every side effect has happened at most once, every call's
``outcome`` is true, the model is told of the call, and the session takes a new instruction.

Two processes per back end keep it quick (a start costs seconds): every crash point gets its
own session and call, the rows are brought to their points one after another in the first
process (each then waits there), one kill -9 cuts them all, and the second process serves
every row's retry, again one after another, so the scripted model answers in order.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from aptix.testing import call, reply
from aptix.testing.server import Hold, ScriptedOpenAIServer
from tests.api.test_turns_live import Server, aptix_serve
from tests.databases import create_pg_database, drop_pg_database

HERE = Path(__file__).parent


@dataclass(frozen=True)
class Point:
    """A crash point: which tool, where the process dies, and what must hold afterwards."""

    tool: str
    #: A gate of crash_gate.py, or "model" (the model holds its answer after the tool ran).
    kill_at: str
    runs: int
    outcome: str


POINTS = {
    "before the batch": Point("charge", "before_run", 0, "unknown"),
    "while a tool runs": Point("charge", "tool_runs", 1, "unknown"),
    "after a tool returned, before its outcome was stored": Point(
        "charge", "after_return", 1, "unknown"
    ),
    "while the model thinks after a tool": Point("charge", "model", 1, "succeeded"),
    "while an approved call runs": Point("vault_wipe", "approved_runs", 1, "unknown"),
    "after an approved call returned": Point("vault_wipe", "after_return", 1, "unknown"),
    "while the model thinks after an approved call": Point("vault_wipe", "model", 1, "succeeded"),
    "during a resume, before the approved call ran": Point(
        "vault_wipe", "before_run", 0, "unknown"
    ),
}


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest) -> Iterator[tuple[str, dict[str, str]]]:
    if request.param == "sqlite":
        yield "sqlite", {}
        return
    url = create_pg_database()
    yield "postgresql", {"APTIX_DATABASE_URL": url}
    drop_pg_database(url)


def _post_in_background(url: str, body: dict[str, Any]) -> threading.Thread:
    def post() -> None:
        with contextlib.suppress(httpx.HTTPError):  # the server dies under it
            httpx.post(f"{url}/v1/agent/execute", json=body, timeout=90)

    thread = threading.Thread(target=post)
    thread.start()
    return thread


def _wait_for(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + 60
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _execute(url: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = httpx.post(f"{url}/v1/agent/execute", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


@dataclass
class Row:
    """One crash point in flight: its session, the request to retry, the request's thread."""

    name: str
    point: Point
    key: str
    sid: str
    retry: dict[str, Any]
    poster: threading.Thread


def _crash_order() -> list[tuple[str, Point]]:
    # The stdio MCP server answers one call at a time: the row that stops it mid-call goes
    # last, after every other row's approved call has come back.
    return sorted(POINTS.items(), key=lambda item: item[1].kill_at == "approved_runs")


def _bring_to_point(
    url: str, name: str, point: Point, n: int, llm: ScriptedOpenAIServer, crash_dir: Path
) -> Row:
    """Start row ``n``'s call and return once it waits at its crash point."""
    key = str(100 + n) if point.tool == "charge" else f"prod{n}"
    sid = httpx.post(f"{url}/v1/sessions", json={}).json()["sessionId"]
    instruction = {"sessionId": sid, "instruction": f"{point.tool} it"}
    arguments = {"invoice": int(key)} if point.tool == "charge" else {"target": key}
    llm.add(reply(None, call(point.tool, arguments, id="c1")))
    if point.tool == "charge":
        retry = instruction  # the documented retry of an instruction: post it again
    else:
        handed = _execute(url, instruction)
        assert handed["kind"] == "tool-only", handed
        [pending] = handed["toolCalls"]
        assert (pending["callId"], pending["outcome"]) == ("c1", "pending"), pending
        approve = [{"callId": "c1", "result": {"approved": True}}]
        retry = {"sessionId": sid, "toolResults": approve}  # post the same results again
    # The request the model holds: after the tool call's response (an instruction), or the
    # first of the resume (the approved call runs before it).
    held = len(llm.requests) + (2 if point.tool == "charge" else 1)
    if point.kill_at == "model":
        llm.add(Hold(reply("late")))
    (crash_dir / f"crash-at-{key}").write_text(point.kill_at)
    poster = _post_in_background(url, retry)
    if point.kill_at == "model":
        _wait_for(lambda: len(llm.requests) >= held, "the model request after the tool")
    else:
        _wait_for((crash_dir / f"reached-{key}-{point.kill_at}").exists, point.kill_at)
    with llm._lock:  # nothing more of this row is asked for before the kill
        assert not llm.script, f"unused answers: {llm.script}"
    return Row(name, point, key, sid, retry, poster)


def _retry(url: str, row: Row, llm: ScriptedOpenAIServer, crash_dir: Path) -> tuple[int, str, bool]:
    """Retry ``row`` on the new process; the runs, the outcome, whether the model was told."""
    llm.add(reply("Recovered."), reply("Next one works."))
    retried = _execute(url, row.retry)
    assert (retried["kind"], retried["text"]) == ("ok", "Recovered."), retried
    told = any(m.get("tool_call_id") == "c1" for m in llm.requests[-1]["messages"])
    turns = httpx.get(f"{url}/v1/sessions/{row.sid}").json()["turns"]
    assert all("outcome" in c for t in turns for c in t["toolCalls"]), turns
    records = [c for c in turns[0]["toolCalls"] if c["callId"] == "c1"]
    outcome = str(records[0]["outcome"]) if len(records) == 1 else f"{len(records)} records"
    # The session is usable: a new instruction runs, and runs nothing again.
    after = _execute(url, {"sessionId": row.sid, "instruction": "next"})
    assert (after["kind"], after["text"]) == ("ok", "Next one works."), after
    runs_file = crash_dir / f"runs-{row.key}"
    runs = len(runs_file.read_text().splitlines()) if runs_file.exists() else 0
    return runs, outcome, told


def _clear(llm: ScriptedOpenAIServer) -> None:
    with llm._lock:  # a row that failed may have left answers behind
        llm.script.clear()


def test_kill_9_at_each_crash_point_then_retry_runs_each_call_at_most_once(
    database: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    backend, db_env = database
    crash_dir = tmp_path / "crash"
    crash_dir.mkdir()
    mcp = {"command": sys.executable, "args": [str(HERE / "crash_mcp.py")]}
    with ScriptedOpenAIServer() as llm, contextlib.ExitStack() as stack:
        env = {
            "APTIX_LLM_BASE_URL": llm.base_url,
            "APTIX_TOOL_MODULES": json.dumps([str(HERE / "crash_tools.py")]),
            "APTIX_MCP_SERVERS": json.dumps(
                {"vault": {**mcp, "env": {"CRASH_DIR": str(crash_dir)}}}
            ),
            "CRASH_DIR": str(crash_dir),
            **db_env,
        }

        def start() -> Server:
            return stack.enter_context(aptix_serve(tmp_path, tmp_path / "serve.log", **env))

        server = start()
        rows: list[Row] = []
        errors: dict[str, str] = {}
        for n, (name, point) in enumerate(_crash_order()):
            try:
                rows.append(_bring_to_point(server.url, name, point, n, llm, crash_dir))
            except AssertionError as exc:
                errors[name] = f"error: {exc}"
                _clear(llm)
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(timeout=20)
        for row in rows:
            row.poster.join(timeout=30)
        for gate_file in crash_dir.glob("crash-at-*"):
            gate_file.unlink()
        _clear(llm)  # "late" is never asked for when the kill came first
        server = start()
        results: dict[str, str] = {}
        wrong: list[str] = list(errors)
        for row in rows:
            try:
                runs, outcome, told = _retry(server.url, row, llm, crash_dir)
            except AssertionError as exc:
                errors[row.name] = f"error: {exc}"
                wrong.append(row.name)
                _clear(llm)
                if server.process.poll() is not None:
                    server = start()
                continue
            results[row.name] = f"runs={runs} | outcome={outcome} | model told={told}"
            if (runs, outcome, told) != (row.point.runs, row.point.outcome, True):
                wrong.append(row.name)
        matrix = "\n".join(
            f"{name} | {backend} | {point.tool} | {results.get(name) or errors[name]}"
            for name, point in POINTS.items()
        )
        print(f"\ncrash point | back end | tool | runs | outcome | model told\n{matrix}")
        assert not wrong, f"wrong at {wrong}:\n{matrix}"
