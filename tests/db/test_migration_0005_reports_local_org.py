"""Migration 0005 says which workflows it gave org ``local``, and the documented move works.

``snapshots/workflows_by_4795fe3.db`` was written by Aptix 4795fe3 (schema 0003, before
workflows had an org) through its HTTP API: ``acme_flow`` drafted and published by ``admin``
(a user name with sessions in two orgs) and ``gamma_flow`` by ``carol`` (no session).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

from sqlalchemy import text

from aptix.db.engine import open_database
from aptix.workflows.sql_store import SqlWorkflowStore

SNAPSHOT = Path(__file__).parent / "snapshots" / "workflows_by_4795fe3.db"

# The statements docs/deployment.md gives for moving a workflow to its org.
MOVE = [
    "UPDATE workflow_revisions SET org = 'acme' WHERE org = 'local' AND workflow_id = 'acme_flow'",
    "UPDATE workflow_heads SET org = 'acme' WHERE org = 'local' AND workflow_id = 'acme_flow'",
    "UPDATE workflow_changes SET counter = counter + 1",
]


def test_db_upgrade_names_each_workflow_given_org_local(tmp_path: Path) -> None:
    copy = tmp_path / "old.db"
    shutil.copyfile(SNAPSHOT, copy)
    url = f"sqlite+aiosqlite:///{copy}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("APTIX_")}
    env |= {"APTIX_DATA_DIR": str(tmp_path), "APTIX_DATABASE_URL": url}
    done = subprocess.run(
        [sys.executable, "-m", "aptix", "db", "upgrade"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Database migrated from 0003_turns to the newest revision" in done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2, done.stderr
    acme, gamma = sorted(lines)
    assert "workflow 'acme_flow' was given org 'local'" in acme
    assert "its author 'admin' is in several orgs" in acme
    assert "workflow 'gamma_flow' was given org 'local'" in gamma
    assert "its author 'carol' has no session" in gamma
    assert all("docs/deployment.md" in line for line in lines)

    async def move_and_list() -> tuple[list[str], list[str]]:
        database = await open_database(url)
        try:
            async with database.transaction() as session:
                for statement in MOVE:
                    await session.execute(text(statement))
            store = SqlWorkflowStore(database)
            return await store.workflow_ids("acme"), await store.workflow_ids("local")
        finally:
            await database.close()

    assert asyncio.run(move_and_list()) == (["acme_flow"], ["gamma_flow"])
