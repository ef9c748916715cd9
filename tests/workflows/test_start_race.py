"""Concurrent ``agent_workflow_run`` calls on one session: the check and the write are one.

Two callers (two HTTP requests, MCP and a model turn) that read the session before either
writes must not both succeed: the store's compare-and-set lets one win, and the loser decides
again on the session as the winner left it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from aptix.results import InvokeResult
from aptix.runtime import Runtime, open_runtime
from aptix.sessions.models import AgentSession
from aptix.settings import AptixSettings

RUN = "agent_workflow_run"


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = AptixSettings(data_dir=tmp_path, semantic_matching=False, load_plugins=False)
    async with open_runtime(settings) as runtime:
        yield runtime


def reads_together(runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first two session reads wait for each other: both calls decide on the same state."""
    sessions = runtime.services.sessions
    read = sessions.get_session
    barrier = asyncio.Barrier(2)
    waiting = [2]

    async def get_session(session_id: str, org: str) -> AgentSession | None:
        session = await read(session_id, org)
        if waiting[0] > 0:
            waiting[0] -= 1
            await asyncio.wait_for(barrier.wait(), 5)
        return session

    monkeypatch.setattr(sessions, "get_session", get_session)


async def both(
    runtime: Runtime,
    session_id: str,
    *arguments: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch | None = None,
) -> list[InvokeResult[str]]:
    """Run the calls at once; with ``monkeypatch``, their session reads wait for each other."""
    context = await runtime.session_context(
        org="local", user="local", role="user", session_id=session_id
    )
    if monkeypatch is not None:
        reads_together(runtime, monkeypatch)
    calls: list[Awaitable[InvokeResult[str]]] = [
        runtime.executor.invoke(RUN, json.dumps(a), context) for a in arguments
    ]
    return list(await asyncio.gather(*calls))


async def new_session(runtime: Runtime, workflow: str | None = None) -> str:
    created = await runtime.services.sessions.create_session(org="local", user="local")
    assert created.result is not None
    if workflow:
        started = await runtime.services.sessions.set_active_workflow(
            created.result.id, workflow, "local", "local"
        )
        assert started.successful
    return created.result.id


async def active(runtime: Runtime, session_id: str) -> str | None:
    session = await runtime.services.sessions.get_session(session_id, "local")
    assert session is not None
    return session.active_workflow_id


def start(workflow: str) -> dict[str, Any]:
    return {"operation": "start_workflow", "workflowId": workflow}


async def test_two_concurrent_starts_on_one_session_let_exactly_one_win(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = await new_session(runtime)
    # Neither manifest allows the transition to the other.
    outcomes = await both(
        runtime,
        session_id,
        start("guided_calculation"),
        start("choose_mode"),
        monkeypatch=monkeypatch,
    )

    won = [o for o in outcomes if o.successful]
    lost = [o for o in outcomes if not o.successful]
    assert len(won) == 1, [o.error_message for o in outcomes]
    assert len(lost) == 1
    winner = json.loads(won[0].result or "")["workflowId"]
    loser = "choose_mode" if winner == "guided_calculation" else "guided_calculation"
    assert await active(runtime, session_id) == winner
    # The loser is refused by the transition rule, as a later call would be.
    assert lost[0].error_message == (
        f"Workflow '{winner}' is active; complete or cancel it before starting '{loser}' "
        "(its manifest does not allow that transition)."
    )


async def test_a_start_racing_a_start_the_winner_allows_becomes_a_transition(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = await new_session(runtime)
    # greet_user allows any transition: whichever order, both end up started in turn.
    outcomes = await both(
        runtime,
        session_id,
        start("greet_user"),
        start("guided_calculation"),
        monkeypatch=monkeypatch,
    )

    results = [json.loads(o.result or "") for o in outcomes if o.successful]
    if len(results) == 2:
        last = next(r for r in results if r.get("previousWorkflowId") == "greet_user")
        assert last["workflowId"] == "guided_calculation"
        assert await active(runtime, session_id) == "guided_calculation"
    else:  # guided_calculation won and does not allow greet_user
        assert await active(runtime, session_id) == "guided_calculation"


async def test_a_cancel_racing_a_complete_ends_the_workflow_once(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = await new_session(runtime, "guided_calculation")
    outcomes = await both(
        runtime,
        session_id,
        {"operation": "complete_workflow", "workflowId": "guided_calculation", "summary": "42"},
        {"operation": "cancel_workflow", "workflowId": "guided_calculation"},
        monkeypatch=monkeypatch,
    )

    assert [o.successful for o in outcomes].count(True) == 1, [o.error_message for o in outcomes]
    (refusal,) = [o.error_message for o in outcomes if not o.successful]
    assert refusal == "No workflow is active in this session."
    assert await active(runtime, session_id) is None


async def test_a_store_that_keeps_losing_gives_up_with_a_clear_refusal(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = await new_session(runtime)
    sessions = runtime.services.sessions
    write = sessions.set_active_workflow
    others = itertools.cycle(["greet_user", None])

    async def always_beaten(*args: Any, **kwargs: Any) -> InvokeResult[AgentSession]:
        # Another caller slips in before each write: the workflow differs at every decision.
        await write(session_id, next(others), "local", "local")
        return await write(*args, **kwargs)

    patched: Callable[..., Awaitable[InvokeResult[AgentSession]]] = always_beaten
    monkeypatch.setattr(sessions, "set_active_workflow", patched)
    (outcome,) = await both(runtime, session_id, start("author_workflow"))
    assert outcome.error_message == (
        "The session's active workflow kept changing while this call ran: nothing was "
        "changed. Read the session again and retry."
    )
