"""Migration 0009 marks the ledger's turns: a version from before the ledger stops (review r4, F1).

Aptix from migration 0008 up to the ledger (37c1718) stored turns without call states, at
revision 0008 like the ledger's first versions: it opened a database the ledger writes and
recorded falsely the turns it answered there. Such a version migrates as c57b553 did,
``alembic.command.upgrade(cfg, "head")`` over the scripts up to 0008: on a database at 0009
that ends at alembic's "Can't locate revision" before it serves anything.

``aptix db upgrade`` says whether it migrated, and from which revision.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
from importlib.resources import files
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from alembic.util import CommandError
from sqlalchemy import Connection
from typer.testing import CliRunner

from aptix.cli.main import app
from aptix.db.engine import open_database
from aptix.db.migrate import head_revision

PRE_LEDGER_HEAD = "0008_workflow_heads"


def _pre_ledger_scripts(into: Path) -> Config:
    """The migrations a version from before the ledger shipped: 0001 to 0008."""
    shipped = Path(str(files("aptix.db") / "migrations"))
    shutil.copytree(shipped, into, ignore=shutil.ignore_patterns("__pycache__"))
    for script in (into / "versions").glob("*.py"):
        if script.name[:4] > PRE_LEDGER_HEAD[:4]:
            script.unlink()
    cfg = Config()
    cfg.set_main_option("script_location", str(into))
    return cfg


async def test_a_version_from_before_the_ledger_cannot_open_the_database(
    database_url: str, tmp_path: Path
) -> None:
    cfg = _pre_ledger_scripts(tmp_path / "migrations")
    database = await open_database(database_url)  # this Aptix migrates it

    def old_upgrade(connection: Connection) -> None:
        cfg.attributes["connection"] = connection
        command.upgrade(cfg, "head")

    try:
        assert head_revision() != PRE_LEDGER_HEAD
        async with database.engine.begin() as connection:
            with pytest.raises(CommandError, match=re.escape(f"'{head_revision()}'")):
                await connection.run_sync(old_upgrade)
    finally:
        await database.close()


def test_db_upgrade_says_whether_it_migrated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "aptix.db"
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("APTIX_DATABASE_URL", f"sqlite+aiosqlite:///{path}")
    runner = CliRunner()

    def upgrade() -> str:
        done = runner.invoke(app, ["db", "upgrade"])
        assert done.exit_code == 0, done.output
        return done.stdout.strip()

    newest = head_revision()
    assert upgrade() == (
        f"Database migrated from nothing (an empty database) to the newest revision ({newest})."
    )
    assert upgrade() == f"Database is at the newest revision ({newest}): nothing to migrate."
    with sqlite3.connect(path) as db:
        db.execute("UPDATE alembic_version SET version_num = ?", (PRE_LEDGER_HEAD,))
    db.close()
    assert upgrade() == (
        f"Database migrated from {PRE_LEDGER_HEAD} to the newest revision ({newest})."
    )
