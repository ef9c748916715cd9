"""A SQLite file removed (or replaced) under a running server: 503, never a write into the void.

SQLite keeps writing through its open connections to an unlinked file: turns answered 200
and ``/healthz`` ok, and everything written after the removal was gone after a restart.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from aptix.api import create_app
from aptix.llm import LlmRequest, LlmResponse
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, reply


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
async def api(data_dir: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = AptixSettings(data_dir=data_dir, load_plugins=False, semantic_matching=False)

    async def answer(request: LlmRequest) -> LlmResponse:
        return reply("ok")

    model = FunctionModel(answer)
    async with open_runtime(settings) as runtime:
        assert runtime.database.is_sqlite
        transport = httpx.ASGITransport(app=create_app(runtime=runtime, model=model))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield client


async def _first_turn(api: httpx.AsyncClient) -> str:
    assert (await api.get("/healthz")).status_code == 200
    first = await api.post("/v1/agent/execute", json={"instruction": "before"})
    assert first.status_code == 200, first.text
    return str(first.json()["sessionId"])


async def _assert_unavailable(api: httpx.AsyncClient, session: str) -> None:
    answers = [
        await api.post("/v1/agent/execute", json={"sessionId": session, "instruction": "after"}),
        await api.post("/v1/agent/execute", json={"instruction": "a new session"}),
        await api.post("/v1/sessions", json={}),
        await api.get(f"/v1/sessions/{session}"),
        await api.get("/healthz"),
    ]
    for answer in answers:
        assert answer.status_code == 503, (answer.request.url, answer.text)
        assert answer.json()["error"]["code"] == "database_unavailable"
        assert int(answer.headers["retry-after"]) > 0


async def test_removing_the_data_folder_makes_the_database_unavailable(
    api: httpx.AsyncClient, data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    session = await _first_turn(api)
    shutil.rmtree(data_dir)
    await _assert_unavailable(api, session)
    gone = [r for r in caplog.records if "[Database_SqliteFile__Gone]" in r.getMessage()]
    assert len(gone) == 1  # logged once, with the path, however many requests meet it
    assert "was removed" in gone[0].getMessage()


async def test_a_file_put_in_its_place_is_not_written_to_behind_the_servers_back(
    api: httpx.AsyncClient, data_dir: Path
) -> None:
    session = await _first_turn(api)
    database = data_dir / "aptix.db"
    # A restore from a copy: the same bytes, another file than the one the server has open.
    copy = data_dir / "copy.db"
    shutil.copyfile(database, copy)
    database.unlink()
    copy.rename(database)
    await _assert_unavailable(api, session)
