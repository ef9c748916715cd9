"""A read left running at its time limit does not ask the caller to check for a change.

``list_authoring_workflows`` of an org with 3,000 workflows answered 504 "did not finish
within 30 seconds and could not be stopped: it may still complete. Check whether it took
effect before retrying." (review r4 F2, round 73): words for a change, given to a read,
which changes nothing. A change cut short the same way still says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from aptix.api import create_app
from aptix.runtime import Runtime

INVOKE = "/v1/tools/agent_workflow_authoring/invoke"
LIMIT = 0.2


async def _outlives_its_limit(*_args: Any, **_kwargs: Any) -> Any:
    """A store read or write whose clean-up outlives the call's limit: it is left behind."""
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        await asyncio.sleep(LIMIT * 2)
    return {}


@pytest.fixture
async def api(runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    runtime.executor.set_timeout("agent_workflow_authoring", LIMIT)
    transport = httpx.ASGITransport(app=create_app(runtime=runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client


async def _cut_short(api: httpx.AsyncClient, **arguments: Any) -> str:
    answer = await api.post(INVOKE, json={"arguments": arguments})
    assert answer.status_code == 504, answer.text
    error = answer.json()["error"]
    assert error["code"] == "timeout"
    message: str = error["message"]
    return message


@pytest.mark.parametrize(
    ("operation", "arguments"),
    [
        ("list_authoring_workflows", {}),
        ("get_workflow", {"workflowId": "offsite"}),
        ("workflow_history", {"workflowId": "offsite"}),
    ],
)
async def test_a_read_cut_short_says_it_changed_nothing(
    runtime: Runtime,
    api: httpx.AsyncClient,
    monkeypatch: pytest.MonkeyPatch,
    operation: str,
    arguments: dict[str, Any],
) -> None:
    store = runtime.workflows.store
    for read in ("latest", "history", "workflow_ids"):
        monkeypatch.setattr(store, read, _outlives_its_limit, raising=False)
    message = await _cut_short(api, operation=operation, **arguments)
    assert message.startswith(
        f"The tool 'agent_workflow_authoring' did not finish within {LIMIT:g} seconds"
    )
    assert "took effect" not in message
    assert "it only reads, so it changed nothing" in message


async def test_a_change_cut_short_still_asks_to_check_whether_it_took_effect(
    runtime: Runtime, api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime.workflows.store, "append", _outlives_its_limit)
    message = await _cut_short(
        api, operation="draft_workflow", workflowId="offsite", title="Offsite", description="P."
    )
    assert "Check whether it took effect before retrying." in message
