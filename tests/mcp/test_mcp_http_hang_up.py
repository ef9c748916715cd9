"""``/mcp``: once the client has closed the connection, no call it posted starts.

A batch runs at most 8 of its calls at once; closing the connection cancels the ones
running, and the ones still waiting their turn never start. Nor does a call still on its
way to its tool (quota, workflow sync, the SDK's dispatch) when the client goes.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from starlette.types import ASGIApp, Message

from tests.api.hang_up import http_scope
from tests.mcp.test_mcp_http_cancel_early import BATCH_VERSION, HEADERS, _call, _mcp_app, _paid

HOLD_TOOLS = Path(__file__).parent / "hold_tools.py"


async def _post_then_hang_up(
    app: ASGIApp, body: object, hang_up: anyio.Event, left: anyio.Event
) -> list[Message]:
    """POST ``body`` to ``/mcp`` as uvicorn serves it; the client leaves at ``hang_up``.

    ``left`` is set as the server is told so. What the server sent is returned.
    """
    sent: list[Message] = []
    requested = False

    async def receive() -> Message:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": json.dumps(body).encode()}
        await hang_up.wait()
        left.set()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = http_scope("/mcp", {**HEADERS, **BATCH_VERSION})
    with anyio.fail_after(30):
        await app(scope, receive, send)
    return sent


def _held(tmp_path: Path) -> list[str]:
    held = tmp_path / "held"
    return held.read_text().split() if held.exists() else []


async def test_batch_calls_waiting_their_turn_never_start_once_the_client_has_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The review's case: 8 calls run, the 9th waits its turn, and the client goes."""
    batch = [_call(number, "hold", {"number": number}) for number in range(1, 9)]
    batch.append(_call(9, "pay", {"invoice": 9}))
    hang_up, left = anyio.Event(), anyio.Event()
    async with (
        _mcp_app(tmp_path, monkeypatch, HOLD_TOOLS) as (_, app),
        anyio.create_task_group() as group,
    ):
        group.start_soon(_post_then_hang_up, app, batch, hang_up, left)
        with anyio.fail_after(30):
            while len(_held(tmp_path)) < 8:  # noqa: ASYNC110 - the tools' own mark
                await anyio.sleep(0.02)
        hang_up.set()
    assert sorted(_held(tmp_path), key=int) == [str(number) for number in range(1, 9)]
    assert _paid(tmp_path) == []  # invoice 9 was never paid: its client had gone


@pytest.mark.parametrize("batched", [True, False], ids=["in a batch", "alone"])
async def test_a_call_on_its_way_to_its_tool_never_runs_once_the_client_has_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batched: bool
) -> None:
    call = _call(1, "pay", {"invoice": 1})
    hang_up, left = anyio.Event(), anyio.Event()
    async with _mcp_app(tmp_path, monkeypatch) as (runtime, app):
        reached, go_on = anyio.Event(), anyio.Event()
        check = runtime.workflows.sync.check

        async def slow_sync() -> None:  # the sync's database round trip, on a busy host
            reached.set()
            await go_on.wait()
            await check()

        monkeypatch.setattr(runtime.workflows.sync, "check", slow_sync)
        async with anyio.create_task_group() as group:
            body = [call] if batched else call
            group.start_soon(_post_then_hang_up, app, body, hang_up, left)
            with anyio.fail_after(30):
                await reached.wait()
                hang_up.set()
                await left.wait()  # the server was told the client has gone
            go_on.set()
    assert _paid(tmp_path) == []  # the tool never ran
