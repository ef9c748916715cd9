"""One registry across processes (issue 14 #4): a publish reaches every process in 0.5 s."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.workflows.sync import SYNC_INTERVAL, WorkflowSync
from tests.api.live import serve
from tests.databases import create_pg_database, drop_pg_database
from tests.tenancy.test_keys_and_roles import FIELDS

AUTHORING = "/v1/tools/agent_workflow_authoring/invoke"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def _publish(runtime: Runtime, workflow_id: str = "offsite") -> None:
    authoring = runtime.workflows.authoring
    assert (await authoring.draft(workflow_id, "Plan an offsite", "Plans.", "ada", "acme")).ok
    assert (await authoring.update(workflow_id, FIELDS, "ada", "acme")).ok
    assert (await authoring.publish(workflow_id, "root", "acme")).ok


def test_the_check_interval_is_under_one_second() -> None:
    assert SYNC_INTERVAL <= 0.5


async def test_a_publish_on_one_runtime_is_served_by_another_after_one_interval(
    tmp_path: Path,
) -> None:
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, semantic_matching=False)
    async with open_runtime(settings) as a, open_runtime(settings) as b:
        clock = FakeClock()
        sync = WorkflowSync(b.workflows.store, b.workflows.registry, clock=clock)
        await sync.load()
        await _publish(a)
        # Checked a moment ago: not checked again yet.
        assert await sync.check() is False
        assert b.workflows.registry.get("offsite", "acme") is None
        clock.now += SYNC_INTERVAL
        assert await sync.check() is True
        served = b.workflows.registry.get("offsite", "acme")
        assert served is not None
        assert served.status.value == "published"
        assert b.workflows.registry.get("offsite", "globex") is None
        # Nothing changed: the next check reads the counter and reloads nothing.
        clock.now += SYNC_INTERVAL
        assert await sync.check() is False
        # A status change travels the same way.
        assert (
            await a.workflows.authoring.update("offsite", {"status": "deprecated"}, "root", "acme")
        ).ok
        clock.now += SYNC_INTERVAL
        assert await sync.check() is True
        deprecated = b.workflows.registry.get("offsite", "acme")
        assert deprecated is not None
        assert deprecated.status.value == "deprecated"


async def test_authoring_decides_on_what_the_store_holds_now(tmp_path: Path) -> None:
    """B's admin deprecates what A just published: B must not act on its stale copy."""
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, semantic_matching=False)
    async with open_runtime(settings) as a, open_runtime(settings) as b:
        await _publish(a)
        deprecated = await b.workflows.authoring.update(
            "offsite", {"status": "deprecated"}, "root", "acme"
        )
        assert deprecated.ok, deprecated
        assert deprecated.workflow is not None
        assert deprecated.workflow["version"] == "0.1.0"


@pytest.fixture
def pg_url() -> Iterator[str]:
    url = create_pg_database()
    yield url
    drop_pg_database(url)


def _author(base: str, **arguments: Any) -> dict[str, Any]:
    answer = httpx.post(f"{base}{AUTHORING}", json={"arguments": arguments}, timeout=30)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    assert result["ok"], result
    return result


def test_two_served_processes_on_postgresql_see_a_publish_within_one_interval(
    tmp_path: Path, pg_url: str
) -> None:
    env = {"APTIX_DATABASE_URL": pg_url, "APTIX_SEMANTIC_MATCHING": "false"}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    # A migrates the database before B starts.
    with serve(tmp_path / "a", **env) as a, serve(tmp_path / "b", **env) as b:
        listed = httpx.get(f"{b}/v1/workflows", timeout=30).json()["workflows"]
        assert "offsite" not in [w["workflowId"] for w in listed]
        _author(
            a, operation="draft_workflow", workflowId="offsite", title="Offsite", description="P."
        )
        _author(a, operation="update_workflow", workflowId="offsite", fields=FIELDS)
        _author(a, operation="publish_workflow", workflowId="offsite")
        published_at = time.monotonic()
        # Any request B starts one interval after the publish committed sees it: B's last
        # check either came after the commit, or is old enough to be repeated.
        time.sleep(SYNC_INTERVAL)
        seen = httpx.get(f"{b}/v1/workflows/offsite", timeout=30)
        assert seen.status_code == 200, (
            f"B still answers {seen.status_code} {seen.text} "
            f"{time.monotonic() - published_at:.2f} s after A published"
        )
        assert seen.json()["workflow"]["status"] == "published"
        matched = httpx.post(
            f"{b}/v1/workflows/match", json={"userMessage": "Use workflow: offsite"}, timeout=30
        ).json()["matches"]
        assert matched[0]["workflowId"] == "offsite"
        # And back: B deprecates, A serves the deprecated version.
        _author(
            b, operation="update_workflow", workflowId="offsite", fields={"status": "deprecated"}
        )
        time.sleep(SYNC_INTERVAL)
        on_a = httpx.get(f"{a}/v1/workflows/offsite", timeout=30).json()
        assert on_a["workflow"]["status"] == "deprecated"


async def test_mcp_and_model_turns_of_another_runtime_serve_the_publish(tmp_path: Path) -> None:
    import asyncio

    from mcp.client.client import Client

    from aptix.mcp import build_mcp_server
    from aptix.testing import ScriptedModel, reply

    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, semantic_matching=False)
    async with (
        open_runtime(settings) as a,
        open_runtime(settings) as b,
        open_runtime(settings) as c,
    ):
        await _publish(a)
        await asyncio.sleep(SYNC_INTERVAL)
        async with Client(build_mcp_server(b, org="acme", user="ann")) as client:
            found = await client.call_tool(
                "agent_workflow_registry",
                {"operation": "get_workflow_manifest", "workflowId": "offsite"},
            )
        assert not found.is_error, found
        session = await c.services.sessions.create_session(org="acme", user="ann")
        assert session.result is not None
        model = ScriptedModel.of(reply("Hi."))
        await c.reasoner(model).execute(
            session_id=session.result.id, org="acme", user="ann", instruction="hello"
        )
        assert "offsite" in model.requests[0].messages[0]["content"]


class _DownStore:
    """A store whose database is unreachable."""

    def __init__(self) -> None:
        self.reads = 0

    async def change_marker(self) -> int:
        self.reads += 1
        raise ConnectionRefusedError("database down")


async def test_a_failed_check_leaves_the_registry_and_lets_requests_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from aptix.workflows.registry import WorkflowRegistry

    clock = FakeClock()
    registry = WorkflowRegistry()
    store = _DownStore()
    sync = WorkflowSync(store, registry, clock=clock)  # type: ignore[arg-type]
    with caplog.at_level("WARNING", logger="aptix.workflows"):
        assert await sync.check() is False
        assert await sync.check() is False  # still throttled: no second wait on the database
        assert store.reads == 1
        clock.now += SYNC_INTERVAL
        assert await sync.check() is False
        assert store.reads == 2
    # Logged once, not per request.
    assert [r.getMessage() for r in caplog.records] == [
        "Could not check for workflow changes: database down"
    ]
    # Authoring must not decide on a copy it could not check.
    with pytest.raises(ConnectionRefusedError):
        await sync.check(force=True)
    assert registry.revision == 0
