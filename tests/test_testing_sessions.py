from aptix.modes.catalog import load_mode_catalog
from aptix.testing.sessions import InMemorySessionManager


async def test_in_memory_sessions_follow_the_store_rules() -> None:
    manager = InMemorySessionManager(load_mode_catalog())
    created = await manager.create_session(org="acme", user="ann")
    assert created.result is not None
    session_id = created.result.id
    assert await manager.get_session(session_id, "globex") is None
    refused = await manager.set_session_mode(session_id, "nope", "r", "acme", "ann")
    assert (refused.error_message or "").startswith("Unknown mode 'nope'")
    changed = await manager.set_session_mode(session_id, "calculation", "r", "acme", "ann")
    assert changed.result is not None
    assert [(h.previous_mode, h.mode) for h in changed.result.mode_history] == [
        ("general", "calculation")
    ]
    active = await manager.set_active_workflow(session_id, "w", "acme", "ann")
    assert active.result is not None
    assert active.result.active_workflow_id == "w"
    # The same compare-and-set as the SQL store: nothing changes when it is not "expected".
    lost = await manager.set_active_workflow(session_id, None, "acme", "ann", expected="v")
    assert (lost.error_message or "").startswith("The session's active workflow changed")
    assert (await manager.get_session(session_id, "acme")).active_workflow_id == "w"
    assert [s.id for s in await manager.list_sessions("acme", "ann")] == [session_id]
    orphan = await manager.create_session(org="acme", user="ann", parent_session_id="x" * 32)
    assert orphan.error_message == f"Unknown session '{'x' * 32}'."
