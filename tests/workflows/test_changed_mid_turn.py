"""A workflow changed by one process governs a turn already running in another (DESIGN §6).

Two runtimes on one database stand for two ``aptix serve`` processes. Process A disables,
removes or narrows a workflow while process B's turn runs in it, and B serves no other
request: from one sync interval after the change, B's turn no longer grants what the
workflow stopped granting, and cannot start a disabled workflow.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from aptix.llm.types import LlmResponse
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, call, reply
from aptix.tools.context import context_for
from aptix.workflows.sync import SYNC_INTERVAL

FIELDS = {
    "userIntentPatterns": ["run the risky flow"],
    "instructionText": "Greet people.",
    # The calculation mode does not offer agent_hello_world: only the workflow grants it.
    "permittedTools": ["agent_hello_world"],
    "completionCriteria": ["Greeted."],
}
START = {"operation": "start_workflow", "workflowId": "risky"}
HELLO = {"name": "Ada"}
NOT_PERMITTED = "Workflow error: the tool 'agent_hello_world' is not permitted"


@asynccontextmanager
async def _two_processes(tmp_path: Path, database_url: str) -> AsyncIterator[tuple[Runtime, ...]]:
    settings = AptixSettings(
        data_dir=tmp_path, database_url=database_url, load_plugins=False, semantic_matching=False
    )
    async with open_runtime(settings) as a, open_runtime(settings) as b:
        yield a, b


async def _publish(runtime: Runtime, org: str) -> None:
    authoring = runtime.workflows.authoring
    assert (await authoring.draft("risky", "Risky", "Greets.", "root", org)).ok
    assert (await authoring.update("risky", FIELDS, "root", org)).ok
    assert (await authoring.publish("risky", "root", org)).ok


async def _disable(runtime: Runtime, org: str) -> None:
    disabled = await runtime.workflows.authoring.update(
        "risky", {"status": "disabled"}, "root", org
    )
    assert disabled.ok, disabled


async def _remove(runtime: Runtime, org: str) -> None:
    await _disable(runtime, org)
    assert (await runtime.workflows.authoring.remove("risky", "root", org)).ok


async def _narrow(runtime: Runtime, org: str) -> None:
    authoring = runtime.workflows.authoring
    narrower = {"permittedTools": ["agent_calculator"], "version": "0.2.0"}
    assert (await authoring.update("risky", narrower, "root", org)).ok
    assert (await authoring.publish("risky", "root", org)).ok


#: One model step: its response, or a coroutine that makes a change first.
Step = Callable[[], LlmResponse | Awaitable[LlmResponse]]


def _steps(*steps: Step) -> FunctionModel:
    """A model answering each request with the next step's response."""
    queue = list(steps)
    return FunctionModel(lambda _request: queue.pop(0)())


def _after(change: Callable[[], Awaitable[None]], response: LlmResponse) -> Step:
    """A step that makes ``change`` on A, waits one sync interval, then answers ``response``."""

    async def step() -> LlmResponse:
        await change()
        await asyncio.sleep(SYNC_INTERVAL)  # B's last check is now old enough to repeat
        return response

    return step


async def _session(runtime: Runtime, org: str) -> str:
    created = await runtime.services.sessions.create_session(
        org=org, user="ann", mode="calculation"
    )
    assert created.result is not None
    return created.result.id


def _org() -> str:
    # PostgreSQL's database is shared by the module's tests: each test has an org of its own.
    return f"org{uuid.uuid4().hex[:10]}"


@pytest.mark.parametrize(
    "change", [_disable, _remove, _narrow], ids=["disabled", "removed", "narrowed"]
)
async def test_a_running_turn_stops_granting_what_another_process_withdrew(
    tmp_path: Path, database_url: str, change: Callable[[Runtime, str], Awaitable[None]]
) -> None:
    org = _org()
    async with _two_processes(tmp_path, database_url) as (a, b):
        await _publish(a, org)
        await b.workflows.refresh()
        session_id = await _session(b, org)
        model = _steps(
            lambda: reply(None, call("agent_workflow_run", START, id="c1")),
            lambda: reply(None, call("agent_hello_world", HELLO, id="c2")),
            _after(lambda: change(a, org), reply(None, call("agent_hello_world", HELLO, id="c3"))),
            lambda: reply("Done."),
        )
        result = await b.reasoner(model).execute(
            session_id=session_id, org=org, user="ann", instruction="run the risky flow"
        )
    started, granted, withdrawn = result.tool_calls
    assert started["outcome"] == "succeeded", started
    assert granted["outcome"] == "succeeded", granted
    assert withdrawn["outcome"] == "failed", withdrawn
    assert withdrawn["errorMessage"].startswith(NOT_PERMITTED), withdrawn
    # The model is no longer offered it either.
    assert "agent_hello_world" not in [t["name"] for t in model.requests[3].tools]


async def test_a_running_turn_cannot_start_a_workflow_another_process_disabled(
    tmp_path: Path, database_url: str
) -> None:
    org = _org()
    async with _two_processes(tmp_path, database_url) as (a, b):
        await _publish(a, org)
        await b.workflows.refresh()
        session_id = await _session(b, org)
        model = _steps(
            _after(
                lambda: _disable(a, org), reply(None, call("agent_workflow_run", START, id="c1"))
            ),
            lambda: reply(None, call("agent_hello_world", HELLO, id="c2")),
            lambda: reply("Done."),
        )
        result = await b.reasoner(model).execute(
            session_id=session_id, org=org, user="ann", instruction="run the risky flow"
        )
        session = await b.services.sessions.get_session(session_id, org)
    refused, not_offered = result.tool_calls
    assert refused["outcome"] == "failed", refused
    assert refused["errorMessage"] == "Workflow 'risky' is disabled and cannot be run."
    assert not_offered["outcome"] == "failed", not_offered
    assert session is not None
    assert session.active_workflow_id is None


async def test_a_call_through_the_executor_decides_on_what_another_process_stored(
    tmp_path: Path, database_url: str
) -> None:
    """No request boundary between the change and the call: the executor checks itself."""
    org = _org()
    async with _two_processes(tmp_path, database_url) as (a, b):
        await _publish(a, org)
        await b.workflows.refresh()
        session_id = await _session(b, org)
        session = await b.services.sessions.get_session(session_id, org)
        assert session is not None
        context = context_for(session, org=org, user="ann", role="user")
        started = await b.executor.invoke("agent_workflow_run", json.dumps(START), context)
        assert started.successful, started
        running = replace(session, active_workflow_id="risky")
        context = context_for(running, org=org, user="ann", role="user")
        assert (await b.executor.invoke("agent_hello_world", json.dumps(HELLO), context)).successful
        await _disable(a, org)
        await asyncio.sleep(SYNC_INTERVAL)
        refused = await b.executor.invoke("agent_hello_world", json.dumps(HELLO), context)
    assert not refused.successful
    assert refused.errors[0].message.startswith(NOT_PERMITTED)


async def test_each_step_of_a_turn_offers_what_the_store_holds_now(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model's next request, not only the guard, follows a change made meanwhile."""
    org = _org()
    async with _two_processes(tmp_path, database_url) as (a, b):
        # Only the turn's own check is left: nothing but the step brings B up to date.
        monkeypatch.setattr(b.executor, "_before_call", None)
        await _publish(a, org)
        await b.workflows.refresh()
        session_id = await _session(b, org)
        model = _steps(
            lambda: reply(None, call("agent_workflow_run", START, id="c1")),
            _after(
                lambda: _disable(a, org), reply(None, call("agent_hello_world", HELLO, id="c2"))
            ),
            lambda: reply("Done."),
        )
        result = await b.reasoner(model).execute(
            session_id=session_id, org=org, user="ann", instruction="run the risky flow"
        )
    assert "agent_hello_world" in [t["name"] for t in model.requests[1].tools]
    refused = result.tool_calls[1]
    assert refused["errorMessage"].startswith(NOT_PERMITTED), refused
    assert "agent_hello_world" not in [t["name"] for t in model.requests[2].tools]
    assert "Active workflow: none." in str(model.requests[2].messages[0]["content"])
