"""A turn is a use of its session: it bumps ``updatedAt`` when it starts and when it ends.

Lists ("most recently updated first") and ``aptix chat --continue`` (the first of that list)
then pick the session just chatted in, not an idle one created later. SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from aptix.llm.types import LlmRequest, LlmResponse
from aptix.runtime import Runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, reply


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> AptixSettings:
    return AptixSettings(data_dir=tmp_path, database_url=database_url, load_plugins=False)


async def test_a_turn_bumps_its_session_when_it_starts_and_when_it_ends(runtime: Runtime) -> None:
    sessions, user = runtime.services.sessions, uuid.uuid4().hex  # the PostgreSQL DB is shared
    asked, go = asyncio.Event(), asyncio.Event()

    async def answer(_: LlmRequest) -> LlmResponse:
        asked.set()
        await go.wait()
        return reply("Hi.")

    async def listed() -> list[str]:
        return [s.id for s in await sessions.list_sessions("acme", user)]

    used = (await sessions.create_session(org="acme", user=user)).result
    idle = (await sessions.create_session(org="acme", user=user)).result
    assert used is not None
    assert idle is not None
    assert await listed() == [idle.id, used.id]
    reasoner = runtime.reasoner(FunctionModel(answer))
    turn = asyncio.create_task(
        reasoner.execute(session_id=used.id, org="acme", user=user, instruction="Hello")
    )
    await asyncio.wait_for(asked.wait(), 30)
    assert await listed() == [used.id, idle.id]  # bumped as the turn started
    later = (await sessions.create_session(org="acme", user=user)).result
    assert later is not None
    go.set()
    assert (await asyncio.wait_for(turn, 30)).text == "Hi."
    assert await listed() == [used.id, later.id, idle.id]  # and again as it ended
    stored = await sessions.get_session(used.id, "acme")
    assert stored is not None
    assert stored.updated_at > stored.created_at
