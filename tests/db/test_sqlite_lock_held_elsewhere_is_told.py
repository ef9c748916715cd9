"""A SQLite file another process holds locked: the wait is told within a second (review r8 F3).

Every command waited the whole busy timeout (30 s) in silence for a lock another process
held (``BEGIN EXCLUSIVE`` in the ``sqlite3`` shell, a backup): the user could not tell a
wait from a hang. After a second of waiting, a warning says that the file is locked by
another process and how long Aptix waits for it; the unit of work goes on waiting, and
goes through as soon as the lock is released.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sqlite3
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, text
from typer.testing import CliRunner

from aptix.cli.main import app
from aptix.db.engine import Database, open_database
from tests.environment import own_settings

BUSY_TIMEOUT = 4.0


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    db = await open_database(f"sqlite+aiosqlite:///{tmp_path / 'aptix.db'}", migrate=False)
    await db.run(lambda tx: tx.execute(text("CREATE TABLE notes (body text NOT NULL)")))
    db.busy_timeout = BUSY_TIMEOUT
    yield db
    await db.close()


def _insert(tx: Connection) -> None:
    tx.execute(text("INSERT INTO notes VALUES ('x')"))


def _locked_for(path: Path, seconds: float) -> None:
    """Hold ``path``'s write lock from another connection for ``seconds``, from now on."""
    held = threading.Event()

    def hold() -> None:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
        held.set()
        time.sleep(seconds)
        other.execute("ROLLBACK")
        other.close()

    threading.Thread(target=hold, daemon=True).start()
    assert held.wait(10)


async def test_a_wait_for_a_lock_held_elsewhere_is_logged_within_a_second(
    database: Database, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="aptix.db")
    _locked_for(tmp_path / "aptix.db", 2.5)
    started = time.time()
    await asyncio.wait_for(database.run(_insert), timeout=BUSY_TIMEOUT + 2)  # waits, then goes

    [told] = [r for r in caplog.records if r.name == "aptix.db"]
    assert told.levelno == logging.WARNING
    assert told.created - started < 2.0
    assert re.fullmatch(
        rf"The SQLite file {re.escape(str(tmp_path / 'aptix.db'))} is locked by another process: "
        r"waiting up to [23] s for its write lock\.",
        told.getMessage(),
    ), told.getMessage()


async def test_a_short_wait_is_not_told(
    database: Database, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="aptix.db")
    _locked_for(tmp_path / "aptix.db", 0.3)
    await database.run(_insert)
    await database.run(_insert)
    assert [r for r in caplog.records if r.name == "aptix.db"] == []
    assert (
        await database.read_one(
            lambda tx: tx.execute(text("SELECT count(*) FROM notes")).scalar_one()
        )
        == 2
    )


def test_a_command_says_it_waits_for_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own_settings(monkeypatch, tmp_path)
    monkeypatch.setenv("APTIX_SEMANTIC_MATCHING", "false")
    runner = CliRunner()
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    _locked_for(tmp_path / "aptix.db", 3.0)

    listed = runner.invoke(app, ["sessions", "list", "--json"])

    assert listed.exit_code == 0, listed.output
    assert listed.stdout.strip() == "[]"
    [line] = listed.stderr.splitlines()
    assert re.search(
        r" WARNING aptix\.db \[-\] The SQLite file .*aptix\.db is locked by another process: "
        r"waiting up to 2[89] s for its write lock\.$",
        line,
    ), line
