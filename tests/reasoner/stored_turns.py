"""Turns written into the database as an earlier Aptix stored them, for the upgrade tests.

The tests run on SQLite and on PostgreSQL; each row gets a fresh id, since the PostgreSQL
database is shared by a module's tests.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from aptix import AgentTool
from aptix.db.types import UtcDateTime
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from tests.tenancy.conftest import bearer

_INSERT = sa.text(
    "INSERT INTO turns (id, session_id, org, user_id, seq, status, instruction, text, data,"
    " created_at, updated_at, version, lease_until, owner)"
    " VALUES (:id, :sid, 'acme', 'ann', 1, :status, :instruction, :text, :data,"
    " :now, :now, :version, :lease, :owner)"
).bindparams(sa.bindparam("now", type_=UtcDateTime()), sa.bindparam("lease", type_=UtcDateTime()))


@asynccontextmanager
async def acme_runtime(
    tmp_path: Path, database_url: str, *unguarded: type[AgentTool]
) -> AsyncIterator[Runtime]:
    """A runtime on ``database_url`` whose one API key, ``ka``, is ann of acme.

    ``unguarded`` tools are registered with the mode guard out: each stands for an MCP
    server's tool, which a mode lists.
    """
    settings = AptixSettings(
        data_dir=tmp_path,
        database_url=database_url,
        load_plugins=False,
        api_keys="ka=acme:ann",
        semantic_matching=False,
    )
    async with open_runtime(settings) as opened:
        for tool in unguarded:
            opened.registry.register(tool)
        if unguarded:
            opened.executor._guard = None
        yield opened


def acme_client(app: Any) -> httpx.AsyncClient:
    """A client of ``app`` speaking as ann of acme (key ``ka``)."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test", headers=bearer("ka")
    )


async def new_session(runtime: Runtime) -> str:
    """A new session of ann of acme; its id."""
    created = await runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    return created.result.id


async def store_turn(
    runtime: Runtime,
    session_id: str,
    data: dict[str, Any],
    *,
    status: str,
    instruction: str,
    version: int,
    text: str | None = None,
    now: datetime | None = None,
    lease: datetime | None = None,
    owner: str | None = None,
) -> None:
    """Insert turn 1 of ``session_id`` with ``data`` as its ``turns.data``, as written."""
    row = {
        "id": uuid.uuid4().hex,
        "sid": session_id,
        "status": status,
        "instruction": instruction,
        "text": text,
        "data": json.dumps(data),
        "now": now or datetime.now(UTC),
        "version": version,
        "lease": lease,
        "owner": owner,
    }
    await runtime.database.run(lambda tx: tx.execute(_INSERT, row))
