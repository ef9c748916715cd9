"""``aptix mcp``'s line protocol under load and at its ends (review r5 F1-F3, F6; r3 F2).

Every request read gets exactly one answer: at the end of input the requests already read
are still answered; a client that stops reading stdout stops the reading of stdin; a client
that closes stdout stops the answers, not the process with a traceback; a request reusing an
id still waiting for its answer is refused; an over-long request line is refused with its id.
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from mcp import types
from mcp.server.lowlevel import Server

from aptix.mcp.stdio import IN_FLIGHT, INPUT_ENDED, TooLong, capped_lines, line_streams

Handler = Callable[[Any, types.CallToolRequestParams], Awaitable[types.CallToolResult]]

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-03-26",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _call(request_id: object, seconds: float, tag: str = "") -> dict[str, Any]:
    arguments = {"seconds": seconds, "tag": tag}
    params = {"name": "wait", "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def _wait(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    await anyio.sleep(float(arguments.get("seconds", 0)))
    return types.CallToolResult(content=[types.TextContent(type="text", text=arguments["tag"])])


class _Wire:
    """Stands for the stdout wire: keeps the lines written; writes wait while ``open`` is unset."""

    def __init__(self, failing: BaseException | None = None) -> None:
        self.lines: list[Any] = []
        self.open = anyio.Event()
        self.open.set()
        self.answered = anyio.Event()  # set once a line is written
        self._failing = failing
        self._text = ""

    async def write(self, text: str) -> None:
        await self.open.wait()
        if self._failing is not None:
            raise self._failing
        self._text += text

    async def flush(self) -> None:
        *whole, self._text = self._text.split("\n")
        self.lines += [json.loads(line) for line in whole]
        if self.lines:
            self.answered.set()


async def _lines(messages: list[object], pulled: list[int] | None = None) -> AsyncIterator[str]:
    for message in messages:
        if pulled is not None:
            pulled.append(1)
        yield json.dumps(message) + "\n"


async def _serve(
    lines: AsyncIterator[str], wire: _Wire, drain: float = 30, handler: Handler = _wait
) -> None:
    server: Server[Any] = Server("test", on_call_tool=handler)
    streams = line_streams(lines, cast(anyio.AsyncFile[str], wire), 1 << 20, drain)
    async with streams as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _by_id(lines: list[Any]) -> dict[Any, list[Any]]:
    found: dict[Any, list[Any]] = {}
    for line in lines:
        for answer in line if isinstance(line, list) else [line]:
            found.setdefault(answer.get("id"), []).append(answer)
    return found


async def test_every_request_read_before_the_end_of_input_is_answered_once() -> None:
    calls = [_call(i, 0.05 * (i % 3), f"t{i}") for i in range(1, 41)]
    wire = _Wire()
    with anyio.fail_after(30):
        await _serve(_lines([INIT, INITIALIZED, *calls, [_call("b", 0.1, "tb")]]), wire)
    answers = _by_id(wire.lines)
    for i in range(1, 41):
        assert [a["result"]["content"][0]["text"] for a in answers[i]] == [f"t{i}"], answers[i]
    assert wire.lines[-1] == [answers["b"][0]]  # the batch's answer, as a batch
    assert answers["b"][0]["result"]["content"][0]["text"] == "tb"


async def test_a_request_still_running_after_the_drain_is_answered_that_the_input_ended() -> None:
    wire = _Wire()
    with anyio.fail_after(30):
        await _serve(_lines([INIT, INITIALIZED, _call("quick", 0), _call("long", 60)]), wire, 0.5)
    answers = _by_id(wire.lines)
    assert answers["quick"][0]["result"]["content"][0]["text"] == ""
    # Once: the server's own "Connection closed" as it stops is not written after it.
    assert answers["long"] == [
        {"jsonrpc": "2.0", "id": "long", "error": {"code": -32000, "message": INPUT_ENDED}}
    ]


def test_a_pipe_into_aptix_mcp_gets_every_answer(tmp_path: Path) -> None:
    calculations = [
        {
            "jsonrpc": "2.0",
            "id": i,
            "method": "tools/call",
            "params": {"name": "agent_calculator", "arguments": {"expression": f"{i}*3"}},
        }
        for i in range(1, 31)
    ]
    text = "".join(json.dumps(m) + "\n" for m in [INIT, INITIALIZED, *calculations])
    done = subprocess.run(
        [sys.executable, "-m", "aptix", "mcp"],
        input=text.encode(),
        capture_output=True,
        env={**os.environ, "APTIX_DATA_DIR": str(tmp_path), "APTIX_SEMANTIC_MATCHING": "false"},
        timeout=120,
        check=False,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0, done.stderr[-2000:]
    assert [a["id"] for a in answers] == list(range(31))  # in order: one at a time each
    for i, answer in enumerate(answers[1:], start=1):
        assert answer["result"]["structuredContent"]["result"] == i * 3, answer


async def test_a_client_not_reading_stops_the_reading_of_its_requests() -> None:
    pulled: list[int] = []
    wire = _Wire()
    stopped_reading = anyio.Event()
    pings = [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(1, 501)]

    async def lines() -> AsyncIterator[str]:
        for message in (INIT, INITIALIZED):
            yield json.dumps(message) + "\n"
        await stopped_reading.wait()
        async for line in _lines(pings, pulled):
            yield line

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(_serve, lines(), wire)
            await wire.answered.wait()  # initialize answered
            wire.open = anyio.Event()  # the client stops reading
            stopped_reading.set()
            await anyio.sleep(1)
            # Each answer waiting for the wire holds its request's slot: the lines stop there.
            assert len(pulled) <= IN_FLIGHT + 2, len(pulled)
            wire.open.set()
    assert [a["id"] for a in wire.lines] == list(range(501))


async def test_a_closed_stdout_stops_the_answers_without_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    wire = _Wire(failing=BrokenPipeError(32, "Broken pipe"))
    pings = [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(1, 6)]
    with anyio.fail_after(30), caplog.at_level(logging.WARNING, "aptix.mcp.stdio"):
        await _serve(_lines([INIT, INITIALIZED, *pings]), wire)  # raises nothing
    said = [r.getMessage() for r in caplog.records if r.name == "aptix.mcp.stdio"]
    assert len(said) == 1, said
    assert "stdout was closed by the client" in said[0]


def test_aptix_mcp_ends_cleanly_when_the_client_closes_stdout(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "aptix", "mcp"],
        env={**os.environ, "APTIX_DATA_DIR": str(tmp_path), "APTIX_SEMANTIC_MATCHING": "false"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    try:
        process.stdin.write(json.dumps(INIT).encode() + b"\n")
        process.stdin.flush()
        assert json.loads(process.stdout.readline())["id"] == 0
        process.stdout.close()
        process.stdin.write(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
        process.stdin.close()
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    err = process.stderr.read().decode()
    process.stderr.close()
    assert code == 0, err
    assert "Traceback" not in err
    assert "stdout was closed by the client" in err


async def test_a_request_reusing_the_id_of_a_batch_request_still_running_is_refused() -> None:
    wire = _Wire()

    async def lines() -> AsyncIterator[str]:
        yield json.dumps(INIT) + "\n"
        await wire.answered.wait()  # a client waits for the answer to initialize
        for message in (INITIALIZED, [_call("d", 1, "from-batch")]):
            yield json.dumps(message) + "\n"
        await anyio.sleep(0.3)
        yield json.dumps(_call("d", 0, "from-single")) + "\n"

    with anyio.fail_after(30):
        await _serve(lines(), wire)
    reused = {
        "jsonrpc": "2.0",
        "id": "d",
        "error": {
            "code": -32600,
            "message": 'Invalid Request: the id "d" is waiting for an answer already.',
        },
    }
    assert wire.lines[1] == reused
    assert len(wire.lines) == 3
    assert [a["result"]["content"][0]["text"] for a in wire.lines[2]] == ["from-batch"]


async def test_an_over_long_request_is_refused_with_its_own_id() -> None:
    long_text = 'x\\"' * 700_000
    request = (
        '{"jsonrpc": "2.0", "method": "tools/call", "id": "long-7", '
        f'"params": {{"name": "wait", "arguments": {{"tag": "{long_text}", "id": 3}}}}}}\n'
    )
    unreadable = '{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "x", "p": "' + "y" * 2000 + '"}\n'
    source = io.BytesIO((request + unreadable + '{"jsonrpc": "2.0", "id": 9}\n').encode())
    lines = [line async for line in capped_lines(source, 1000)]
    assert lines[:2] == [TooLong("long-7"), TooLong(None)]  # two ids: neither is sure
    wire = _Wire()

    async def served() -> AsyncIterator[str | TooLong]:
        for message in (INIT, INITIALIZED):
            yield json.dumps(message) + "\n"
        yield lines[0]
        yield lines[1]

    with anyio.fail_after(30):
        await _serve(served(), wire)  # type: ignore[arg-type]
    answers = _by_id(wire.lines)
    assert answers["long-7"] == [
        {
            "jsonrpc": "2.0",
            "id": "long-7",
            "error": {
                "code": -32600,
                "message": "Invalid Request: the line is longer than 1048576 bytes "
                "(APTIX_MAX_BODY_BYTES); it was not read.",
            },
        }
    ]
    assert [a["error"]["code"] for a in answers[None]] == [-32700]
