"""A SQLite connect cancelled halfway returns once the connection it was opening is closed.

Review s2, F2 (round 69): aiosqlite's connect, cancelled (Ctrl-C as ``aptix chat`` opened its
database), returned at once and left its thread opening the file; the thread answered after
the event loop had closed and printed a thread traceback. Now the cancelled connect waits for
that connection and closes it: its thread has ended when the cancellation comes out.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from aptix.db.engine import create_engine, open_database

#: How long a connect that is still held must not have returned (it cannot, once fixed).
STILL_HELD_SECONDS = 0.5


class HeldConnect:
    """``sqlite3.connect`` that holds aiosqlite's first connect until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.thread: threading.Thread | None = None
        self._connect = sqlite3.connect

    def __call__(self, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        if self.thread is None and "_connection_worker_thread" in threading.current_thread().name:
            self.thread = threading.current_thread()
            self.entered.set()
            self.release.wait(60)
        return self._connect(*args, **kwargs)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> HeldConnect:
    connect = HeldConnect()
    monkeypatch.setattr(sqlite3, "connect", connect)
    return connect


async def _cancel_while_held(held: HeldConnect, task: asyncio.Task[Any]) -> None:
    await asyncio.get_running_loop().run_in_executor(None, held.entered.wait, 60)
    task.cancel()
    await asyncio.wait({task}, timeout=STILL_HELD_SECONDS)
    returned_early = task.done()
    held.release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not returned_early, "the cancelled connect left its thread opening the file"
    assert held.thread is not None
    # The connection was closed: its thread stops (it may still be on its way out).
    await asyncio.get_running_loop().run_in_executor(None, held.thread.join, 60)
    assert not held.thread.is_alive()


async def test_a_connect_cancelled_halfway_closes_the_connection_first(
    held: HeldConnect, tmp_path: Path
) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'aptix.db'}")

    async def connect() -> None:
        async with engine.connect():
            pass

    try:
        await _cancel_while_held(held, asyncio.ensure_future(connect()))
    finally:
        await engine.dispose()


async def test_opening_the_database_cancelled_halfway_closes_it(
    held: HeldConnect, tmp_path: Path
) -> None:
    opening = asyncio.ensure_future(open_database(f"sqlite:///{tmp_path / 'aptix.db'}"))
    await _cancel_while_held(held, opening)
