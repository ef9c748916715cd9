"""Rolling a deploy back across 0009 is documented, and what the docs say works (review r4 F3).

Migration 0009 changes no table and no row: moving the database back to 0008, as
docs/deployment.md says, lets an Aptix with the ledger that ships only up to 0008 (c515196)
start again. The refusal a newer database meets says where that is written.
"""

from __future__ import annotations

import re
import shutil
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, inspect

from aptix.db.engine import open_database
from aptix.db.migrate import _refuse_unknown, current_revision, head_revision, upgrade_to_head
from aptix.errors import ConfigurationError

DOC = Path(__file__).parents[2] / "docs" / "deployment.md"
BEFORE_LEDGER_MARK = "0008_workflow_heads"


def _scripts_up_to_0008(into: Path) -> Config:
    """The migrations an Aptix from before 0009 shipped: 0001 to 0008."""
    shipped = Path(str(files("aptix.db") / "migrations"))
    shutil.copytree(shipped, into, ignore=shutil.ignore_patterns("__pycache__"))
    for script in (into / "versions").glob("*.py"):
        if script.name[:4] > BEFORE_LEDGER_MARK[:4]:
            script.unlink()
    cfg = Config()
    cfg.set_main_option("script_location", str(into))
    return cfg


def _rollback_sql() -> str:
    """The statement docs/deployment.md gives to move a database from 0009 back to 0008."""
    blocks = re.findall(r"```sql\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    [sql] = [b for b in blocks if "alembic_version" in b]
    return sql.strip()


def _schema(connection: Connection) -> dict[str, Any]:
    found = inspect(connection)
    return {
        table: sorted((c["name"], str(c["type"])) for c in found.get_columns(table))
        for table in sorted(found.get_table_names())
        if table != "alembic_version"
    }


async def test_the_documented_rollback_lets_an_aptix_up_to_0008_start(
    database_url: str, tmp_path: Path
) -> None:
    old = _scripts_up_to_0008(tmp_path / "migrations")

    def old_start(connection: Connection) -> dict[str, Any]:
        old.attributes["connection"] = connection
        command.upgrade(old, "head")  # what such a version does on start-up
        return _schema(connection)

    database = await open_database(database_url, migrate=False)
    try:
        if await current_revision(database.engine) is None:
            async with database.engine.begin() as connection:
                at_0008 = await connection.run_sync(old_start)
        else:  # the module's PostgreSQL database, already migrated by an earlier parameter
            at_0008 = None
        await upgrade_to_head(database.engine)
        assert await current_revision(database.engine) == head_revision()
        async with database.engine.begin() as connection:
            await connection.exec_driver_sql(_rollback_sql())
        assert await current_revision(database.engine) == BEFORE_LEDGER_MARK
        async with database.engine.begin() as connection:
            rolled_back = await connection.run_sync(old_start)  # starts: no refusal
        assert await current_revision(database.engine) == BEFORE_LEDGER_MARK
        if at_0008 is not None:
            assert rolled_back == at_0008  # 0009 changed no table
        # The next newer process marks the database again, converting nothing.
        done = await upgrade_to_head(database.engine)
        assert (done.before, done.after) == (BEFORE_LEDGER_MARK, head_revision())
    finally:
        await database.close()


def test_the_rollback_is_documented_with_who_may_run_where() -> None:
    doc = DOC.read_text()
    start = doc.index("## Rolling back an upgrade")
    section = doc[start : doc.index("\n## ", start + 1)]
    assert "0009_call_ledger" in section
    assert BEFORE_LEDGER_MARK in section
    assert "37c1718" in section  # only versions with the call ledger may go back to 0008
    assert "backup" in section  # the other migrations change tables: no way back but one


def test_the_refusal_of_a_newer_database_points_to_rolling_back() -> None:
    with pytest.raises(ConfigurationError) as refused:
        _refuse_unknown("0099_from_a_newer_aptix")
    line = refused.value.one_line()
    assert "upgrade Aptix" in line
    assert "roll the database back" in line
    assert "docs/deployment.md" in line
