"""Tool calls stored before the ledger are shown with ``state`` and ``outcome`` (DESIGN §14).

``snapshots/sessions_by_b8ad48e.db`` was written by Aptix b8ad48e (schema 0006), whose
turns stored calls without either: alice (org ``acme``) has a completed calculator turn and a
turn waiting for ``request_user_approval``; bob (org ``beta``) has calls his mode refused.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aptix.api import create_app
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import ScriptedModel
from tests.tenancy.conftest import bearer

SNAPSHOT = Path(__file__).parent / "snapshots" / "sessions_by_b8ad48e.db"
ALICE = "78d1c9bc6af44cb3a71469092fa10435"
BOB = "965bb5f3dad3437aa49015c97a4adfe9"


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[Any]:
    copy = tmp_path / "old.db"
    shutil.copyfile(SNAPSHOT, copy)
    settings = AptixSettings(
        data_dir=tmp_path,
        database_url=f"sqlite+aiosqlite:///{copy}",
        load_plugins=False,
        api_keys="ka=acme:alice,kb=beta:bob",
        semantic_matching=False,
    )
    async with open_runtime(settings) as runtime:
        yield create_app(runtime=runtime, model=ScriptedModel())


async def _turns(app: Any, key: str, session_id: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test", headers=bearer(key)
    ) as client:
        answer = await client.get(f"/v1/sessions/{session_id}")
    assert answer.status_code == 200, answer.text
    turns: list[dict[str, Any]] = answer.json()["turns"]
    return turns


def _states(calls: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(c["callId"], c["state"], c["outcome"]) for c in calls]


async def test_old_calls_carry_state_and_outcome(app: Any) -> None:
    completed, pending = await _turns(app, "ka", ALICE)
    assert completed["status"] == "completed"
    assert _states(completed["toolCalls"]) == [("call_26", "succeeded", "succeeded")]
    assert pending["status"] == "pending"
    assert _states(pending["toolCalls"]) == [
        ("call_27", "succeeded", "succeeded"),
        ("call_28", "awaiting_client", "pending"),
    ]
    assert _states(pending["pendingCalls"]) == [("call_28", "awaiting_client", "pending")]
    assert pending["toolCalls"][1]["resultJson"]  # the stored fields are kept as they were


async def test_old_refused_calls_are_failed(app: Any) -> None:
    calls = [c for t in await _turns(app, "kb", BOB) for c in t["toolCalls"]]
    assert _states(calls) == [
        ("call_30", "failed", "failed"),
        ("call_31", "failed", "failed"),
        ("call_32", "failed", "failed"),
    ]
    assert all("not offered" in c["errorMessage"] for c in calls)
