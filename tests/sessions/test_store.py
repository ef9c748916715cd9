"""The session store suite; every test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import itertools
import re

import pytest

from aptix.sessions.sql import SqlSessionManager


async def _create(manager: SqlSessionManager, org: str = "acme", user: str = "ann") -> str:
    created = await manager.create_session(org=org, user=user, title="t")
    assert created.result is not None, created.error_message
    return created.result.id


async def test_created_session_has_a_hex_id_and_the_default_mode(
    manager: SqlSessionManager,
) -> None:
    created = await manager.create_session(org="acme", user="ann", title="Plan")
    session = created.result
    assert session is not None
    assert re.fullmatch(r"[0-9a-f]{32}", session.id)
    assert (session.org, session.user, session.title) == ("acme", "ann", "Plan")
    assert session.mode == "general"
    assert session.mode_history == ()
    assert session.version == 1
    assert session.created_at.tzinfo is not None
    assert await manager.get_session(session.id, "acme") == session


async def test_create_in_an_unknown_mode_is_refused_listing_valid_modes(
    manager: SqlSessionManager,
) -> None:
    created = await manager.create_session(org="acme", user="ann", mode="nope")
    assert created.error_message == (
        "Unknown mode 'nope'. Valid modes: general, workflow_authoring, calculation."
    )


@pytest.mark.parametrize(
    ("org", "user", "refused"),
    [
        ("o" * 201, "ann", "The org name is 201 characters long; the most is 200."),
        ("acme", "", "The user name is empty."),
        ("acme", " ann", "The user name has spaces around it."),
    ],
    ids=["org-long", "user-empty", "user-spaced"],
)
async def test_an_owner_name_its_column_cannot_hold_is_refused_on_every_backend(
    manager: SqlSessionManager, org: str, user: str, refused: str
) -> None:
    # PostgreSQL raised on the INSERT where SQLite kept the name: both now refuse it first.
    created = await manager.create_session(org=org, user=user)
    assert (created.result, created.error_message) == (None, refused)
    assert await manager.list_sessions(org=org, user=user) == []


async def test_mode_change_appends_history_with_previous_mode(manager: SqlSessionManager) -> None:
    session_id = await _create(manager)
    first = await manager.set_session_mode(session_id, "calculation", "numbers", "acme", "ann")
    second = await manager.set_session_mode(session_id, "general", "done", "acme", "bob")
    assert first.successful
    assert second.successful
    session = await manager.get_session(session_id, "acme")
    assert session is not None
    assert session.mode == "general"
    assert session.mode_reason == "done"
    assert session.version == 3
    history = [(h.previous_mode, h.mode, h.reason, h.changed_by) for h in session.mode_history]
    assert history == [
        ("general", "calculation", "numbers", "ann"),
        ("calculation", "general", "done", "bob"),
    ]
    assert session.mode_set_at == session.mode_history[-1].changed_at


async def test_unknown_mode_is_refused_and_nothing_changes(manager: SqlSessionManager) -> None:
    session_id = await _create(manager)
    refused = await manager.set_session_mode(session_id, "astrology", "why not", "acme", "ann")
    assert refused.error_message == (
        "Unknown mode 'astrology'. Valid modes: general, workflow_authoring, calculation."
    )
    session = await manager.get_session(session_id, "acme")
    assert session is not None
    assert (session.mode, session.mode_history, session.version) == ("general", (), 1)


async def test_another_orgs_session_behaves_like_a_missing_one(manager: SqlSessionManager) -> None:
    session_id = await _create(manager, org="acme")
    assert await manager.get_session(session_id, "globex") is None
    assert await manager.list_sessions("globex", "ann") == []
    changed = await manager.set_session_mode(session_id, "calculation", "x", "globex", "ann")
    missing = await manager.set_session_mode("f" * 32, "calculation", "x", "globex", "ann")
    assert changed.error_message == f"Unknown session '{session_id}'."
    assert missing.error_message == f"Unknown session '{'f' * 32}'."
    workflow = await manager.set_active_workflow(session_id, "w", "globex", "ann")
    assert not workflow.successful
    child = await manager.create_session(org="globex", user="x", parent_session_id=session_id)
    assert child.error_message == f"Unknown session '{session_id}'."
    session = await manager.get_session(session_id, "acme")
    assert session is not None
    assert (session.mode, session.active_workflow_id) == ("general", None)


async def test_malformed_session_id_is_simply_unknown(manager: SqlSessionManager) -> None:
    assert await manager.get_session("'; DROP TABLE sessions; --", "acme") is None
    refused = await manager.set_session_mode("not-an-id", "general", "x", "acme", "ann")
    assert refused.error_message == "Unknown session 'not-an-id'."


async def test_list_is_scoped_to_org_and_user_and_paginated(manager: SqlSessionManager) -> None:
    ids = [await _create(manager) for _ in range(5)]
    await _create(manager, user="bob")
    await _create(manager, org="globex")
    listed = await manager.list_sessions("acme", "ann", limit=50)
    assert sorted(s.id for s in listed) == sorted(ids)
    page1 = await manager.list_sessions("acme", "ann", limit=2, offset=0)
    page2 = await manager.list_sessions("acme", "ann", limit=2, offset=2)
    page3 = await manager.list_sessions("acme", "ann", limit=2, offset=4)
    paged = [s.id for s in page1 + page2 + page3]
    assert len(paged) == 5
    assert sorted(paged) == sorted(ids)
    assert [s.id for s in listed] == paged  # newest first, stable


async def test_branch_links_child_to_parent(manager: SqlSessionManager) -> None:
    parent = await _create(manager)
    child = await manager.create_session(
        org="acme", user="ann", mode="workflow_authoring", parent_session_id=parent
    )
    assert child.result is not None
    assert child.result.parent_session_id == parent
    assert child.result.mode == "workflow_authoring"
    assert [c.id for c in await manager.list_children(parent, "acme")] == [child.result.id]
    assert await manager.list_children(parent, "globex") == []


async def test_active_workflow_is_set_and_cleared(manager: SqlSessionManager) -> None:
    session_id = await _create(manager)
    started = await manager.set_active_workflow(session_id, "guided_calculation", "acme", "ann")
    assert started.result is not None
    assert started.result.active_workflow_id == "guided_calculation"
    cleared = await manager.set_active_workflow(session_id, None, "acme", "ann")
    assert cleared.result is not None
    assert cleared.result.active_workflow_id is None
    assert cleared.result.version == 3


async def test_active_workflow_compare_and_set_changes_nothing_on_a_mismatch(
    manager: SqlSessionManager,
) -> None:
    session_id = await _create(manager)
    started = await manager.set_active_workflow(session_id, "a", "acme", "ann", expected=None)
    assert started.successful
    lost = await manager.set_active_workflow(session_id, "b", "acme", "ann", expected=None)
    assert lost.error_message == (
        "The session's active workflow changed meanwhile (it is 'a', not none): nothing was "
        "changed."
    )
    swapped = await manager.set_active_workflow(session_id, "b", "acme", "ann", expected="a")
    assert swapped.result is not None
    assert swapped.result.active_workflow_id == "b"
    assert swapped.result.version == 3  # the refused write did not touch the row


async def test_fifty_concurrent_mode_changes_lose_no_history_entry(
    manager: SqlSessionManager,
) -> None:
    session_id = await _create(manager)
    modes = ["calculation", "workflow_authoring", "general"]
    results = await asyncio.gather(
        *(
            manager.set_session_mode(session_id, modes[i % 3], f"change {i}", "acme", f"u{i}")
            for i in range(50)
        )
    )
    assert all(r.successful for r in results), [r.error_message for r in results]
    session = await manager.get_session(session_id, "acme")
    assert session is not None
    history = session.mode_history
    assert len(history) == 50
    assert session.version == 51
    assert history[0].previous_mode == "general"
    for before, after in itertools.pairwise(history):
        assert after.previous_mode == before.mode
    assert session.mode == history[-1].mode
    assert sorted(h.reason for h in history) == sorted(f"change {i}" for i in range(50))
