"""Ctrl-C during ``aptix sessions prune`` tells every batch deleted, and the total (review r8 F2).

On SQLite the batch in flight when Ctrl-C came was committed anyway (the worker thread
finishes it after the await is cancelled) and never reported: the last line on stderr
undercounted the deletions by a batch. The batch in flight is now finished and told, on
either database, and the last line says how many were deleted in all.
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from sqlalchemy import Connection, Table, func, insert, select, text

from aptix.db.engine import Database, open_database
from aptix.db.types import utc_now
from aptix.reasoner import pruning
from aptix.reasoner.pruning import Pruned, prune_sessions
from aptix.reasoner.tables import TurnRow
from aptix.sessions.tables import SessionRow
from tests.databases import create_pg_database, drop_pg_database

SESSIONS = cast(Table, SessionRow.__table__)
TURNS = cast(Table, TurnRow.__table__)
OLD = 6


def _old_sessions(tx: Connection, count: int) -> None:
    used = utc_now() - timedelta(days=40)
    ids = [uuid.uuid4().hex for _ in range(count)]
    common = {"org": "acme", "user_id": "ann", "created_at": used, "updated_at": used}
    tx.execute(
        insert(SESSIONS), [{"id": i, "mode": "general", "version": 1, **common} for i in ids]
    )
    tx.execute(
        insert(TURNS),
        [
            {"id": uuid.uuid4().hex, "session_id": i, "seq": 1, "status": "completed",
             "instruction": "hi", "data": {}, "version": 1, **common}
            for i in ids
        ],
    )  # fmt: skip


def _left(tx: Connection) -> int:
    return int(tx.execute(select(func.count()).select_from(SESSIONS)).scalar_one())


@pytest.fixture(params=["sqlite", "postgresql"])
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    """A fresh database of each kind holding OLD sessions unused for 40 days."""
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'aptix.db'}"
    else:
        url = await asyncio.to_thread(create_pg_database)
    opened = await open_database(url)
    try:
        await opened.run(lambda tx: _old_sessions(tx, OLD))
        yield opened
    finally:
        await opened.close()
        if request.param == "postgresql":
            await asyncio.to_thread(drop_pg_database, url)


async def test_a_batch_cancelled_in_flight_is_finished_and_told(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = threading.Event()
    batches = pruning._batch

    def slow(*args: Any, **kwargs: Any) -> Callable[[Connection], tuple[Pruned, list[str]]]:
        transaction = batches(*args, **kwargs)

        def slowly(tx: Connection) -> tuple[Pruned, list[str]]:
            started.set()
            if database.is_sqlite:
                time.sleep(0.5)  # on the worker thread, which the cancel does not stop
            else:
                tx.execute(text("SELECT pg_sleep(0.5)"))
            return transaction(tx)

        return slowly

    monkeypatch.setattr(pruning, "_batch", slow)
    told: list[Pruned] = []
    pruning_task = asyncio.ensure_future(
        prune_sessions(database, utc_now() - timedelta(days=30), batch_size=2, progress=told.append)
    )
    assert await asyncio.to_thread(started.wait, 30)
    pruning_task.cancel()  # what Ctrl-C does, mid-batch
    with pytest.raises(asyncio.CancelledError):
        await pruning_task
    await asyncio.sleep(1.0)  # SQLite's worker thread commits the batch whatever happened

    deleted = OLD - await database.read_one(_left)
    assert deleted == 2  # the batch in flight went through, and no other began
    assert [(t.sessions, t.turns) for t in told] == [(2, 2)]


# Loaded by Python at start-up: as the prune's second batch deletes its sessions, on the
# SQLite worker thread, the process gets a real Ctrl-C (SIGINT) and the batch is held a
# moment, so that the Ctrl-C is handled while the batch is in flight.
SITECUSTOMIZE = """
import signal, sqlite3, threading, time

_connect = sqlite3.connect
batches = set()  # a batch's DELETE is traced again for each foreign key action it takes


def trace(statement):
    if statement.lstrip().upper().startswith("DELETE FROM SESSIONS") and statement not in batches:
        batches.add(statement)
        if len(batches) == 2:
            signal.raise_signal(signal.SIGINT)
            time.sleep(1.0)


def connect(*args, **kwargs):
    connection = _connect(*args, **kwargs)
    if threading.current_thread().name.startswith("aptix-sqlite"):
        connection.set_trace_callback(trace)
    return connection


sqlite3.connect = sqlite3.dbapi2.connect = connect
"""


def test_ctrl_c_mid_batch_tells_that_batch_and_the_total(tmp_path: Path) -> None:
    database = tmp_path / "aptix.db"

    async def seed() -> None:
        opened = await open_database(f"sqlite+aiosqlite:///{database}")
        try:
            await opened.run(lambda tx: _old_sessions(tx, OLD))
        finally:
            await opened.close()

    asyncio.run(seed())
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    path = os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH")) if p)
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("APTIX_")}
    env |= {
        "PYTHONPATH": path,
        "APTIX_DATA_DIR": str(tmp_path),
        "APTIX_LOAD_PLUGINS": "false",
        "APTIX_SEMANTIC_MATCHING": "false",
        "NO_COLOR": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "aptix", "sessions", "prune", "--older-than", "30d",
         "--batch-size", "2"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip

    assert done.returncode == 130, done.stderr
    assert done.stdout == ""
    with sqlite3.connect(database) as connection:
        left = connection.execute("SELECT count(*) FROM sessions").fetchone()[0]
    assert left == OLD - 4  # the batch in flight went through
    lines = done.stderr.splitlines()
    told = [int(n) for n in re.findall(r"^Deleted (\d+) sessions so far", done.stderr, re.M)]
    assert told == [2, 4], done.stderr
    assert lines[-1] == (
        "Interrupted: deleted 4 sessions and 4 turns in all; the rest are left for the next prune."
    ), done.stderr
