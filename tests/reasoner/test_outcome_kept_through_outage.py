"""A call that ran while the database went away is recorded as it ended, not as lost."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import exc as sa

from aptix.api import create_app
from aptix.reasoner import call_states, endings, ledger
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import ScriptedModel, call, reply

OUTAGE = sa.OperationalError("UPDATE turns", None, ConnectionRefusedError())


@pytest.fixture
async def runtime(database_url: str, tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = AptixSettings(data_dir=tmp_path, database_url=database_url, load_plugins=False)
    async with open_runtime(settings) as opened:
        yield opened


@pytest.fixture(autouse=True)
def _quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(endings, "SAVE_RETRY_SECONDS", (0.0, 0.0, 0.0))


def _down_after_the_call_ran(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch, failures: int
) -> None:
    """The database refuses the next ``failures`` writes once a call has succeeded."""
    store = runtime.turns
    save, settle = store.save, store.settle
    left = [failures]

    def refuse(record: Any) -> None:
        ran = any(e["state"] == "succeeded" for e in record.tool_calls)
        if ran and left[0] > 0:
            left[0] -= 1
            raise OUTAGE

    async def flaky_save(record: Any) -> Any:
        refuse(record)
        return await save(record)

    async def flaky_settle(record: Any) -> Any:
        refuse(record)
        return await settle(record)

    monkeypatch.setattr(store, "save", flaky_save)
    monkeypatch.setattr(store, "settle", flaky_settle)


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture
async def api(runtime: Runtime, model: ScriptedModel) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(runtime=runtime, model=model))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client


async def _run(api: httpx.AsyncClient, model: ScriptedModel) -> tuple[str, int]:
    model.add(reply(None, call("agent_calculator", {"expression": "6*7"}, id="c1")))
    sid = (await api.post("/v1/sessions", json={})).json()["sessionId"]
    told = await api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "go"})
    return sid, told.status_code


def _assert_ran(entry: dict[str, Any]) -> None:
    assert entry["state"] == entry["outcome"] == "succeeded", entry
    assert entry["wasExecuted"] is True
    assert "42" in entry["resultJson"]
    assert call_states.UNKNOWN not in json.dumps(entry)


async def test_a_short_outage_stores_the_ending_once_the_database_is_back(
    runtime: Runtime, api: httpx.AsyncClient, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The checkpoint after the call fails, then the ending's first two attempts: the third lands.
    _down_after_the_call_ran(runtime, monkeypatch, failures=3)
    sid, status = await _run(api, model)
    assert status == 200  # the call ran: answered as the failed turn it is
    [stored] = await runtime.turns.list_turns(sid, "local")
    assert stored.status == "error"
    assert stored.id not in ledger.ENDED_HERE
    [turn] = (await api.get(f"/v1/sessions/{sid}")).json()["turns"]
    assert turn["error"]["code"] == "database_unavailable"
    assert turn["error"]["message"].startswith("Ended because the database was unavailable (")
    _assert_ran(turn["toolCalls"][0])


async def test_a_longer_outage_keeps_the_outcome_for_the_next_read_and_turn(
    runtime: Runtime, api: httpx.AsyncClient, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every attempt fails: the outage outlasts the retries.
    _down_after_the_call_ran(runtime, monkeypatch, failures=1 + 4)
    sid, status = await _run(api, model)
    assert status == 200
    [stored] = await runtime.turns.list_turns(sid, "local")
    assert stored.status == "running"  # the ending is held in this process only

    [turn] = (await api.get(f"/v1/sessions/{sid}")).json()["turns"]
    assert turn["status"] == "error"
    assert turn["error"]["code"] == "database_unavailable"
    _assert_ran(turn["toolCalls"][0])

    model.add(reply("It was 42."))
    again = await api.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "and?"})
    assert again.status_code == 200, again.text
    first, _ = (await api.get(f"/v1/sessions/{sid}")).json()["turns"]
    _assert_ran(first["toolCalls"][0])  # now stored so, by the claim that closed it
    told = [m for m in model.requests[-1].messages if m.get("role") == "tool"]
    assert [m["tool_call_id"] for m in told] == ["c1"]
    assert "42" in str(told[0]["content"])
    assert call_states.UNKNOWN not in str(told[0]["content"])
