"""One MCP call's timeout or error reply leaves the others alone; outcomes say what happened."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from aptix.errors import ConfigurationError
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.tools import AgentToolCall
from tests.tools.mcp_servers import FLAKY, flaky_server
from tests.tools.modes import modes_offering


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "calls.log"


@pytest.fixture
async def flaky(tmp_path: Path, log: Path) -> AsyncIterator[Runtime]:
    servers = {"flaky": flaky_server(log, timeout_seconds=4, approval="never")}
    settings = AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        mcp_servers=servers,
        modes_path=modes_offering(tmp_path, "flaky_*"),
    )
    async with open_runtime(settings) as runtime:
        yield runtime


async def _run(runtime: Runtime, name: str, arguments: dict[str, Any], delay: float = 0) -> Any:
    await asyncio.sleep(delay)
    return await runtime.executor.execute(
        AgentToolCall(f"c-{name}-{delay}", name, json.dumps(arguments)), runtime.tool_context()
    )


async def test_a_timed_out_call_leaves_the_other_calls_to_the_server_running(
    flaky: Runtime, log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert flaky.mcp is not None
    connection = flaky.mcp.connections["flaky"]
    live = connection._live
    # A times out at 4 s; B, sent at 1.5 s, is still running then and answers at 4.5 s.
    hung, other = await asyncio.gather(
        _run(flaky, "flaky_slow", {"text": "A", "seconds": 6}),
        _run(flaky, "flaky_slow", {"text": "B", "seconds": 3}, delay=1.5),
    )
    assert other.outcome == "succeeded", other.error_message
    assert json.loads(other.result_json)["content"][0]["text"] == "B"
    assert hung.outcome == "timed_out"
    assert "MCP server 'flaky' failed while calling 'slow': no answer within 4 seconds" in (
        hung.error_message or ""
    )
    assert connection._live is live is not None  # the session was kept
    assert flaky.mcp.status()["flaky"] is None
    # The timed-out request was cancelled on the server: A never got to its end (at 6 s).
    await asyncio.sleep(2)
    calls = await asyncio.to_thread(log.read_text)
    assert "slow-end B" in calls
    assert "slow-start A" in calls
    assert "slow-end A" not in calls
    # A timeout is not an outage: the server is not reported down.
    assert "failed while" not in capsys.readouterr().err


async def test_an_error_reply_leaves_the_session_and_the_other_calls_alone(
    flaky: Runtime, capsys: pytest.CaptureFixture[str]
) -> None:
    assert flaky.mcp is not None
    live = flaky.mcp.connections["flaky"]._live
    running, refused = await asyncio.gather(
        _run(flaky, "flaky_slow", {"text": "X", "seconds": 2}),
        _run(flaky, "flaky_refuse", {"text": "z"}, delay=0.5),
    )
    assert running.outcome == "succeeded", running.error_message
    assert refused.outcome == "failed"
    assert "refused z" in (refused.error_message or "")
    assert flaky.mcp.connections["flaky"]._live is live is not None
    assert flaky.mcp.status()["flaky"] is None
    assert "WARNING" not in capsys.readouterr().err


async def _pinged(live: Any) -> bool:
    """Wait for the ping a timeout sent; True when the server answered it."""
    probe = live.probe
    assert probe is not None  # a timeout asks the server whether it still answers
    return bool(await probe)


async def test_a_server_that_leaves_a_ping_unanswered_after_a_timeout_is_restarted(
    flaky: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    assert flaky.mcp is not None
    connection = flaky.mcp.connections["flaky"]
    live = connection._live
    blocked = await _run(flaky, "flaky_block", {"seconds": 120})
    assert blocked.outcome == "timed_out"
    # Its loop is blocked: the ping after the timeout goes unanswered too.
    assert not await _pinged(live)
    assert connection._live is not live
    assert "did not answer a ping within 5 seconds after a call timed out" in caplog.text
    again = await _run(flaky, "flaky_echo", {"text": "fresh"})
    assert again.outcome == "succeeded", again.error_message


async def test_a_stuck_server_is_restarted_while_its_calls_overlap(
    flaky: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    """Steady load: each call is sent before the one ahead of it timed out (review s1 F1)."""
    assert flaky.mcp is not None
    connection = flaky.mcp.connections["flaky"]
    live = connection._live
    blocked, waiting = await asyncio.gather(
        _run(flaky, "flaky_block", {"seconds": 120}),
        _run(flaky, "flaky_echo", {"text": "waiting"}, delay=2),
    )
    assert blocked.outcome == waiting.outcome == "timed_out"
    assert live is not None
    if getattr(live, "probe", None) is not None:  # one ping for both timeouts
        assert not await _pinged(live)
    assert connection._live is not live  # restarted while its calls overlapped
    assert "restarted" in caplog.text
    again = await _run(flaky, "flaky_echo", {"text": "fresh"})
    assert again.outcome == "succeeded", again.error_message


async def test_calls_sent_together_that_time_out_together_leave_the_server_running(
    flaky: Runtime, log: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A slow tool called twice at once (a model's parallel calls): not "two in a row"."""
    assert flaky.mcp is not None
    connection = flaky.mcp.connections["flaky"]
    live = connection._live
    # A and B time out together at 4 s; C, sent at 2 s, answers at 5 s, inside its own limit.
    first, second, other = await asyncio.gather(
        _run(flaky, "flaky_slow", {"text": "A", "seconds": 8}),
        _run(flaky, "flaky_slow", {"text": "B", "seconds": 8}),
        _run(flaky, "flaky_slow", {"text": "C", "seconds": 3}, delay=2),
    )
    assert first.outcome == second.outcome == "timed_out"
    assert other.outcome == "succeeded", other.error_message
    assert json.loads(other.result_json)["content"][0]["text"] == "C"
    assert connection._live is live is not None  # the session was kept
    assert "restarted" not in caplog.text
    assert "slow-end C" in await asyncio.to_thread(log.read_text)


async def test_calls_their_callers_cancelled_do_not_make_a_server_look_stuck(
    flaky: Runtime, log: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A cancelled call is owed no answer: the server's silence after one proves nothing."""
    assert flaky.mcp is not None
    connection = flaky.mcp.connections["flaky"]
    live = connection._live
    assert (await _run(flaky, "flaky_slow", {"text": "first", "seconds": 6})).outcome == (
        "timed_out"
    )
    # The only traffic since: a call its caller gave up on (the server is told, and is silent).
    given_up = asyncio.create_task(connection.call_tool("slow", {"text": "gone", "seconds": 9}))
    while "slow-start gone" not in await asyncio.to_thread(log.read_text):  # noqa: ASYNC110
        await asyncio.sleep(0.05)  # (the server, another process, writes the log)
    given_up.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await given_up
    # Then a call times out while another one is still running on the healthy server.
    late, other = await asyncio.gather(
        _run(flaky, "flaky_slow", {"text": "late", "seconds": 6}),
        _run(flaky, "flaky_slow", {"text": "other", "seconds": 3}, delay=1),
    )
    assert late.outcome == "timed_out"
    assert other.outcome == "succeeded", other.error_message
    assert connection._live is live is not None
    assert "restarted" not in caplog.text


async def test_a_crash_after_the_call_was_sent_is_unknown_not_failed(flaky: Runtime) -> None:
    crashed = await _run(flaky, "flaky_crash", {})
    assert crashed.outcome == "unknown"
    message = crashed.error_message or ""
    assert "MCP server 'flaky' failed while calling 'crash'" in message
    assert "may have taken effect" in message
    # The next call finds the server gone at once and opens a fresh session. Starting a Python
    # server took over 4 s on a loaded CI machine, so this call gets a limit that fits it.
    assert flaky.mcp is not None
    connection = flaky.mcp.connections["flaky"]
    connection.config = connection.config.model_copy(update={"timeout_seconds": 30})
    again = await _run(flaky, "flaky_echo", {"text": "back"})
    assert again.outcome == "succeeded", again.error_message


async def test_a_call_the_server_never_got_is_failed(flaky: Runtime, tmp_path: Path) -> None:
    assert flaky.mcp is not None
    connection = flaky.mcp.connections["flaky"]
    await _run(flaky, "flaky_crash", {})
    # The server cannot be started again: the next call is never delivered.
    connection.config = connection.config.model_copy(
        update={"command": str(tmp_path / "gone"), "args": []}
    )
    refused = await _run(flaky, "flaky_echo", {"text": "lost"})
    assert refused.outcome == "failed"
    assert "MCP server 'flaky' failed while connecting" in (refused.error_message or "")


async def test_a_call_whose_limit_ends_while_the_server_restarts_says_so(
    flaky: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    assert flaky.mcp is not None
    connection = flaky.mcp.connections["flaky"]
    connection.config = connection.config.model_copy(update={"timeout_seconds": 1})
    # A timeout, then no answer to a ping either: the server is stuck and is restarted.
    live = connection._live
    assert (await _run(flaky, "flaky_block", {"seconds": 60})).outcome == "timed_out"
    assert not await _pinged(live)
    # The restarted server takes 3 s to start, longer than the call's 1 s limit.
    slow_start = (
        f"import runpy, time; time.sleep(3); runpy.run_path({FLAKY!r}, run_name='__main__')"
    )
    connection.config = connection.config.model_copy(update={"args": ["-c", slow_start]})
    caplog.clear()
    early = await _run(flaky, "flaky_echo", {"text": "early"})
    assert early.outcome == "failed"
    message = early.error_message or ""
    # Not "no answer within 1 seconds": the call never reached the server, nothing hung.
    assert "no answer" not in message
    assert (
        "MCP server 'flaky' failed while connecting: not connected within the call's limit of "
        "1 seconds (still connecting in the background; the next call joins it)"
    ) in message
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("not connected within the call's limit" in line for line in warnings), warnings
    assert not any("no answer" in line for line in warnings), warnings
    deadline = time.monotonic() + 30
    while (later := await _run(flaky, "flaky_echo", {"text": "later"})).outcome != "succeeded":
        assert time.monotonic() < deadline, later.error_message
        # Joined the restart: not connected yet, or connected with too little time left.
        message = later.error_message or ""
        assert "still connecting in the background" in message or "spent connecting" in message
    assert json.loads(later.result_json)["content"][0]["text"] == "later"


async def test_a_call_held_back_by_a_pending_ping_says_so_not_connecting(
    flaky: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    """Review r1 F3 (round 68): the session was open; the call waited for the ping."""
    assert flaky.mcp is not None
    connection = flaky.mcp.connections["flaky"]
    connection.config = connection.config.model_copy(update={"timeout_seconds": 1})
    live = connection._live
    assert (await _run(flaky, "flaky_block", {"seconds": 60})).outcome == "timed_out"
    assert live is not None
    assert live.probe is not None  # the ping waits up to 5 s
    caplog.clear()
    held = await _run(flaky, "flaky_echo", {"text": "held"})
    assert held.outcome == "failed"
    message = held.error_message or ""
    assert "connecting" not in message
    assert (
        "MCP server 'flaky' failed while calling 'echo': not sent within the call's limit of 1 "
        "seconds, waiting for the server to answer a ping after an earlier call timed out (it "
        "is restarted if it leaves the ping unanswered for 5 seconds)"
    ) in message
    # Not an outage: the server is not reported down while connecting.
    assert flaky.mcp.status()["flaky"] is None
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert not any("connecting" in line for line in warnings), warnings
    assert any("waiting for the server to answer a ping" in line for line in warnings), warnings
    assert not await _pinged(live)
    assert connection._live is not live
    assert "is connected again" not in caplog.text


async def test_a_timeout_says_how_much_of_the_limit_went_on_connecting(
    flaky: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert flaky.mcp is not None
    connection = flaky.mcp.connections["flaky"]
    hung = await _run(flaky, "flaky_hang", {})
    assert hung.outcome == "timed_out"
    assert "no answer within 4 seconds" in (hung.error_message or "")
    assert "spent connecting" not in (hung.error_message or "")
    ready = connection._ready

    async def slow_to_connect() -> Any:
        await asyncio.sleep(1.5)  # a restart that takes most of the call's limit
        return await ready()

    monkeypatch.setattr(connection, "_ready", slow_to_connect)
    late = await _run(flaky, "flaky_hang", {})
    assert late.outcome == "timed_out"
    assert re.search(
        r"failed while calling 'hang': no answer within 4 seconds, 1\.[5-9] of them spent "
        r"connecting",
        late.error_message or "",
    ), late.error_message


async def test_the_approval_request_shows_every_argument(tmp_path: Path) -> None:
    servers = {"flaky": flaky_server(approval="always")}
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, mcp_servers=servers)
    text = " " * 2_100 + "; rm -rf /"
    async with open_runtime(settings) as runtime:
        asked = await runtime.executor.invoke(
            "flaky_echo", json.dumps({"text": text}), runtime.tool_context()
        )
    request = json.loads(asked.result or "")
    assert request["kind"] == "approval_request"
    assert request["arguments"] == {"text": text}
    full = "Arguments: " + json.dumps({"text": text}, ensure_ascii=False)
    hidden = len(full) - len(request["details"].split("…")[0])
    assert request["details"].endswith(f"… ({hidden} more characters not shown)")
    assert hidden > len("; rm -rf /")


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        (
            {"db": {}, "db_admin": {}},
            "MCP server 'db': its tool names 'db_*' would also cover the tools of the "
            "MCP server 'db_admin'",
        ),
        (
            {"tools": {"prefix": "db"}, "admin": {"prefix": "DB_Admin"}},
            "MCP server 'tools': its tool names 'db_*' would also cover the tools of the "
            "MCP server 'admin'",
        ),
        ({"agent": {}}, "MCP server 'agent': its tool names 'agent_*' would also cover"),
        ({"mine": {"prefix": "request"}}, "'request_user_approval'"),
        ({"a": {}, "b": {"prefix": "a"}}, "MCP servers 'a' and 'b' share the prefix 'a'"),
    ],
)
async def test_overlapping_prefixes_are_refused_at_start_up(
    tmp_path: Path, servers: dict[str, dict[str, Any]], message: str
) -> None:
    entries = {name: flaky_server(**extra) for name, extra in servers.items()}
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, mcp_servers=entries)
    with pytest.raises(ConfigurationError) as raised:
        async with open_runtime(settings):
            pass
    assert message in str(raised.value)
    assert raised.value.hint is not None
    assert "prefix" in raised.value.hint


def _serve_http(port: int) -> subprocess.Popen[bytes]:
    """The test server over streamable HTTP, once it listens."""
    process = subprocess.Popen(
        [sys.executable, FLAKY, "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return process
        time.sleep(0.1)
    process.kill()
    pytest.fail("the test server did not listen within 30 s")


async def test_a_call_after_an_http_server_restarted_is_sent_again_on_a_new_session(
    tmp_path: Path,
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = await asyncio.to_thread(_serve_http, port)
    servers = {"web": {"url": f"http://127.0.0.1:{port}/mcp", "approval": "never"}}
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, mcp_servers=servers)
    try:
        async with open_runtime(settings) as runtime:
            first = await _run(runtime, "web_echo", {"text": "one"})
            process.terminate()
            await asyncio.to_thread(process.wait, 10)
            # The new process does not know the old session id: it refuses it unrun.
            process = await asyncio.to_thread(_serve_http, port)
            second = await _run(runtime, "web_echo", {"text": "two"})
    finally:
        process.kill()
        await asyncio.to_thread(process.wait, 10)
    assert first.outcome == "succeeded", first.error_message
    assert second.outcome == "succeeded", second.error_message
    assert json.loads(second.result_json)["content"][0]["text"] == "two"


def test_the_serve_check_neither_starts_nor_waits_for_mcp_servers(tmp_path: Path) -> None:
    from aptix.cli.runtime import check_runtime

    started = tmp_path / "started"
    # A server that never answers `initialize`.
    silent = f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\ntime.sleep(120)\n"
    servers = {"mute": {"command": sys.executable, "args": ["-c", silent]}}
    settings = AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        mcp_servers=servers,
        modes_path=modes_offering(tmp_path, "mute_*"),  # still a valid pattern
    )
    clock = time.monotonic()
    check_runtime(settings)
    assert time.monotonic() - clock < 20  # connecting would wait out the 30 s limit
    assert not started.exists()


async def test_over_http_a_timed_out_call_leaves_the_other_calls_running(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = await asyncio.to_thread(_serve_http, port)
    url = f"http://127.0.0.1:{port}/mcp"
    servers = {"web": {"url": url, "approval": "never", "timeout_seconds": 4}}
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, mcp_servers=servers)
    try:
        async with open_runtime(settings) as runtime:
            hung, other = await asyncio.gather(
                _run(runtime, "web_slow", {"text": "A", "seconds": 10}),
                _run(runtime, "web_slow", {"text": "B", "seconds": 3}, delay=1.5),
            )
            after = await _run(runtime, "web_echo", {"text": "after"})
    finally:
        process.kill()
        await asyncio.to_thread(process.wait, 10)
    assert hung.outcome == "timed_out", hung.error_message
    assert other.outcome == "succeeded", other.error_message
    assert after.outcome == "succeeded", after.error_message
