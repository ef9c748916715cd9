"""Bulkheads: one org's blocked sync tools cannot starve another org or the server (issue 25)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import aptix
from aptix.api import create_app
from aptix.logger import AdminLogger
from aptix.results import InvokeResult
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.tools.args import ToolArgs, function_schema
from aptix.tools.base import AgentTool
from aptix.tools.bulkhead import (
    BULKHEADS,
    RETRY_AFTER_SECONDS,
    BulkheadFullError,
    Bulkheads,
    http_refusal,
)
from aptix.tools.context import AgentToolExecutionContext
from tests.tenancy.conftest import bearer

RELEASE = threading.Event()


class _NoArgs(ToolArgs):
    pass


@aptix.tool(usage="Blocks until the test lets it go.")
def hold_thread() -> str:
    """Holds its thread (a sync tool stuck on I/O)."""
    RELEASE.wait(20)
    return "released"


class HoldThreadTool(AgentTool):
    """The class form of a blocking sync tool: ``execute`` is a plain function."""

    TOOL_NAME = "hold_thread_class"
    TOOL_USAGE_METADATA = "Blocks until the test lets it go."

    def __init__(self, logger: AdminLogger) -> None:
        self._logger = logger

    @classmethod
    def schema(cls) -> dict[str, Any]:
        return function_schema(cls.TOOL_NAME, "Blocks until the test lets it go.", _NoArgs)

    def execute(  # type: ignore[override]
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        RELEASE.wait(20)
        return InvokeResult.create('"released"')


@aptix.tool(usage="Answers after a tenth of a second.")
def quick_sync() -> str:
    """A sync tool that takes 0.1 s."""
    time.sleep(0.1)
    return "done"


@pytest.fixture
def release() -> Iterator[threading.Event]:
    RELEASE.clear()
    yield RELEASE
    RELEASE.set()  # never leave a test's threads blocked behind


@pytest.fixture
async def clients(
    tmp_path: Path, release: threading.Event
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    settings = AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        semantic_matching=False,
        api_keys="k-a=org-a:ann,k-b=org-b:bob",
        # Long enough that org B's calls, on a CI worker beside another, never meet it; short
        # beside the 20 s org A's threads are held, which is what a starved call would wait.
        tool_timeout_seconds=1.0,
        tool_threads=2,
    )
    async with open_runtime(settings) as runtime:
        for tool in (hold_thread, HoldThreadTool, quick_sync):
            runtime.registry.register(tool)
        app = create_app(runtime=runtime)
        transport = httpx.ASGITransport(app=app)
        async with (
            httpx.AsyncClient(transport=transport, base_url="http://t", headers=bearer("k-a")) as a,
            httpx.AsyncClient(transport=transport, base_url="http://t", headers=bearer("k-b")) as b,
        ):
            yield a, b


async def test_an_org_holding_every_thread_does_not_slow_another_org(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient], release: threading.Event
) -> None:
    a, b = clients
    # The first match builds org B's index: done here, so below it is one match, not a build.
    warm = await b.post("/v1/workflows/match", json={"userMessage": "plan a trip"})
    assert warm.status_code == 200, warm.text
    held = await asyncio.gather(
        a.post("/v1/tools/hold_thread/invoke", json={"arguments": {}}),
        a.post("/v1/tools/hold_thread_class/invoke", json={"arguments": {}}),
    )
    for answer in held:  # a time limit is a gateway timeout, never 409
        assert answer.status_code == 504, answer.text
        assert answer.json()["error"]["code"] == "timeout"
        assert "did not finish within 1 seconds" in answer.json()["error"]["message"]
    assert BULKHEADS.abandoned("org-a") == 2

    # No clock: a call that waited for a thread would end in 504 after the 1 s limit (the held
    # threads run until ``release``), so 503 "overloaded" is the refusal made at once.
    refused = await a.post("/v1/tools/quick_sync/invoke", json={"arguments": {}})
    assert refused.status_code == 503, refused.text
    assert BULKHEADS.abandoned("org-a") == 2
    assert refused.headers["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert refused.json()["error"]["code"] == "overloaded"
    assert "2 sync tool calls of this organization are still running" in refused.text

    # Org B behind org A's threads would wait until ``release`` and time out (504): 200 is B's
    # own thread, with A's two still held.
    matched, quick = await asyncio.gather(
        b.post("/v1/workflows/match", json={"userMessage": "plan a trip"}),
        b.post("/v1/tools/quick_sync/invoke", json={"arguments": {}}),
    )
    assert BULKHEADS.abandoned("org-a") == 2
    assert matched.status_code == 200, matched.text
    assert quick.status_code == 200, quick.text
    assert quick.json()["result"] == "done"

    release.set()  # the abandoned threads end: org A may call again
    for _ in range(100):
        if BULKHEADS.abandoned("org-a") == 0:
            break
        await asyncio.sleep(0.02)
    again = await a.post("/v1/tools/quick_sync/invoke", json={"arguments": {}})
    assert again.status_code == 200, again.text
    assert again.json()["result"] == "done"


async def test_a_call_still_queued_when_cancelled_is_not_counted_as_abandoned(
    release: threading.Event,
) -> None:
    heads = Bulkheads(threads_per_org=1)
    running = asyncio.ensure_future(heads.run("o", release.wait, 20))
    queued = asyncio.ensure_future(heads.run("o", time.sleep, 0))
    await asyncio.sleep(0.05)
    queued.cancel()
    running.cancel()
    await asyncio.gather(running, queued, return_exceptions=True)
    assert heads.abandoned("o") == 1  # only the one whose thread is really running
    with pytest.raises(BulkheadFullError, match="1 sync tool calls"):
        await heads.run("o", time.sleep, 0)
    assert await heads.run("other", lambda: 7) == 7  # other orgs are untouched
    release.set()
    for _ in range(100):
        if heads.abandoned("o") == 0:
            break
        await asyncio.sleep(0.02)
    assert await heads.run("o", lambda: 8) == 8


def test_only_a_stopped_call_or_a_full_bulkhead_maps_to_a_gateway_status() -> None:
    from aptix.results import ErrorMessage

    def failed(message: str, outcome: str | None = None) -> InvokeResult[str]:
        return InvokeResult(errors=(ErrorMessage(message, outcome),))

    assert http_refusal(failed("any words", "timed_out")) == (504, "timeout", {})
    assert http_refusal(failed("any words", "abandoned")) == (504, "timeout", {})
    assert http_refusal(failed(str(BulkheadFullError(3))))[:2] == (503, "overloaded")  # type: ignore[index]
    # The tool's own words about a time-out are its answer, not ours.
    assert http_refusal(failed("The tool 'x' timed out after 0.5 seconds.")) is None
    assert http_refusal(failed("Unknown workflow 'x'.")) is None
