"""``aptix sessions prune``: old sessions go with everything stored for them (review r4 F3).

Sessions and turns could never be deleted, and every stateless chat completion creates a
session, so the database grew without bound. The command deletes the sessions last used
before a cutoff, with their turns (each holding its calls' ledger), mode history and
conversation fingerprints, and never one whose turn runs or waits for its client.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from sqlalchemy import Table, func, insert, select
from typer.testing import CliRunner

from aptix.cli.main import app
from aptix.db.engine import open_database
from aptix.db.types import utc_now
from aptix.reasoner.tables import TurnRow
from aptix.sessions.tables import FingerprintRow, ModeHistoryRow, SessionRow
from tests.databases import create_pg_database, drop_pg_database

runner = CliRunner()

SESSIONS = cast(Table, SessionRow.__table__)
TURNS = cast(Table, TurnRow.__table__)
HISTORY = cast(Table, ModeHistoryRow.__table__)
FINGERPRINTS = cast(Table, FingerprintRow.__table__)
#: The owner of a turn this (live) process runs: the prune's start-up sweep leaves it running.
ALIVE = f"{socket.gethostname()}:{os.getpid()}:feedf00d:0badcafe"


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """A fresh database of each kind, the one the command opens: it prunes every org's."""
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("APTIX_LOAD_PLUGINS", "false")
    monkeypatch.setenv("APTIX_SEMANTIC_MATCHING", "false")
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'aptix.db'}"
        monkeypatch.setenv("APTIX_DATABASE_URL", url)
        yield url
        return
    url = create_pg_database()
    monkeypatch.setenv("APTIX_DATABASE_URL", url)
    try:
        yield url
    finally:
        drop_pg_database(url)


def _session(sid: str, used: datetime, *, parent: str | None = None, org: str = "acme") -> Any:
    return {
        "id": sid,
        "org": org,
        "user_id": "ann",
        "title": None,
        "mode": "general",
        "mode_reason": None,
        "mode_set_at": None,
        "parent_session_id": parent,
        "active_workflow_id": None,
        "created_at": used,
        "updated_at": used,
        "version": 1,
    }


def _turn(sid: str, seq: int, status: str, used: datetime, **extra: Any) -> Any:
    return {
        "id": uuid.uuid4().hex,
        "session_id": sid,
        "org": "acme",
        "user_id": "ann",
        "seq": seq,
        "status": status,
        "instruction": "hi",
        "text": None,
        "data": {"messages": [], "tool_calls": [{"callId": "c1", "state": "succeeded"}]},
        "created_at": used,
        "updated_at": used,
        "version": 1,
        "lease_until": None,
        "owner": None,
        **extra,
    }


def _store(url: str, *statements: tuple[Table, list[Any]]) -> None:
    async def main() -> None:
        database = await open_database(url)
        try:

            def write(tx: Any) -> None:
                for table, rows in statements:
                    if rows:
                        tx.execute(insert(table), rows)

            await database.run(write)
        finally:
            await database.close()

    asyncio.run(main())


def _counts(url: str) -> dict[str, Any]:
    """The ids of the sessions left, the turns, history and fingerprints left per session."""

    async def main() -> dict[str, Any]:
        database = await open_database(url)
        try:

            def read(tx: Any) -> dict[str, Any]:
                sessions = {r.id: r.parent_session_id for r in tx.execute(select(SESSIONS))}
                per = {
                    name: dict(
                        tx.execute(
                            select(table.c.session_id, func.count()).group_by(table.c.session_id)
                        ).all()
                    )
                    for name, table in (
                        ("turns", TURNS),
                        ("history", HISTORY),
                        ("fingerprints", FINGERPRINTS),
                    )
                }
                return {"sessions": sessions, **per}

            return await database.run(read)
        finally:
            await database.close()

    return asyncio.run(main())


def _seed(url: str) -> dict[str, str]:
    """Sessions of each kind, as many days unused as their names say."""
    now = utc_now()
    old, recent = now - timedelta(days=40), now - timedelta(days=2)
    ids = {
        name: uuid.uuid4().hex
        for name in ("old", "old2", "running", "waiting", "recent", "parent", "child", "touched")
    }
    sessions = [
        _session(ids["old"], old),
        _session(ids["old2"], old, org="globex"),
        _session(ids["running"], old),
        _session(ids["waiting"], old),
        _session(ids["recent"], recent),
        _session(ids["parent"], old),
        _session(ids["child"], recent, parent=ids["parent"]),
        _session(ids["touched"], old),
    ]
    lease = {"lease_until": now + timedelta(hours=1), "owner": ALIVE}
    turns = [
        _turn(ids["old"], 1, "completed", old),
        _turn(ids["old"], 2, "error", old),
        _turn(ids["old2"], 1, "cancelled", old),
        _turn(ids["running"], 1, "completed", old),
        # A turn running since long ago (its last checkpoint old) in a live process.
        _turn(ids["running"], 2, "running", old, **lease),
        _turn(ids["waiting"], 1, "pending", old),
        _turn(ids["recent"], 1, "completed", recent),
        _turn(ids["parent"], 1, "completed", old),
        # An outcome settled into a closed turn lately: the session was used since.
        _turn(ids["touched"], 1, "completed", recent),
    ]
    history = [
        {
            "session_id": ids["old"],
            "seq": 1,
            "previous_mode": "general",
            "mode": "calculation",
            "reason": "numbers",
            "changed_at": old,
            "changed_by": "ann",
        }
    ]
    fingerprints = [
        {
            "org": "acme",
            "user_id": "ann",
            "session_id": sid,
            "fingerprint": uuid.uuid4().hex,
            "model": "aptix-general",
            "created_at": old,
        }
        for sid in (ids["old"], ids["recent"])
    ]
    _store(
        url, (SESSIONS, sessions), (TURNS, turns), (HISTORY, history), (FINGERPRINTS, fingerprints)
    )
    return ids


def test_prune_deletes_old_sessions_with_their_turns_history_and_fingerprints(
    database_url: str,
) -> None:
    ids = _seed(database_url)

    pruned = runner.invoke(app, ["sessions", "prune", "--older-than", "30d"])

    assert pruned.exit_code == 0, pruned.output
    assert pruned.stdout.startswith("Deleted 3 sessions and 4 turns last used before ")
    left = _counts(database_url)
    gone = {ids["old"], ids["old2"], ids["parent"]}
    assert set(left["sessions"]) == set(ids.values()) - gone
    assert left["history"] == {}
    # The running and the waiting turns, and the turn settled lately, keep their sessions.
    assert left["turns"] == {
        ids["running"]: 2,
        ids["waiting"]: 1,
        ids["recent"]: 1,
        ids["touched"]: 1,
    }
    assert left["fingerprints"] == {ids["recent"]: 1}
    # A branched session stays, without the parent that is gone.
    assert left["sessions"][ids["child"]] is None
    assert "3 sessions last used before then are kept: a turn of theirs" in pruned.stderr


def test_a_dry_run_counts_and_deletes_nothing(database_url: str) -> None:
    ids = _seed(database_url)

    counted = runner.invoke(app, ["sessions", "prune", "--older-than", "30d", "--dry-run"])

    assert counted.exit_code == 0, counted.output
    assert counted.stdout.startswith("Would delete 3 sessions and 4 turns last used before ")
    assert set(_counts(database_url)["sessions"]) == set(ids.values())

    as_json = runner.invoke(
        app, ["sessions", "prune", "--older-than", "30d", "--dry-run", "--json"]
    )
    assert as_json.exit_code == 0, as_json.output
    shown = json.loads(as_json.stdout)
    assert (shown["dryRun"], shown["sessions"], shown["turns"], shown["kept"]) == (True, 3, 4, 3)
    assert shown["olderThan"] == "30d"


def test_prune_goes_batch_by_batch_and_says_how_far_it_got(database_url: str) -> None:
    ids = _seed(database_url)

    pruned = runner.invoke(
        app, ["sessions", "prune", "--older-than", "30d", "--batch-size", "1", "--json"]
    )

    assert pruned.exit_code == 0, pruned.output
    shown = json.loads(pruned.stdout)
    assert (shown["dryRun"], shown["sessions"], shown["turns"]) == (False, 3, 4)
    # One line a batch on stderr, the running totals: the sessions go in id order.
    progress = re.findall(
        r"^Deleted (\d+) sessions? so far \((\d+) turns?\)\.$", pruned.stderr, re.M
    )
    assert [int(s) for s, _ in progress] == [1, 2, 3]
    assert int(progress[-1][1]) == 4
    assert {ids["old"], ids["old2"], ids["parent"]}.isdisjoint(_counts(database_url)["sessions"])


def test_nothing_to_prune_says_so(database_url: str) -> None:
    _seed(database_url)

    pruned = runner.invoke(app, ["sessions", "prune", "--older-than", "52w"])

    assert pruned.exit_code == 0, pruned.output
    assert pruned.stdout.startswith("Deleted 0 sessions and 0 turns last used before ")


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("30", "'30' is not a duration"),
        ("3x", "'3x' is not a duration"),
        ("", "'' is not a duration"),
        ("-1d", "'-1d' is not a duration"),
        ("1.5d", "'1.5d' is not a duration"),
        ("0d", "at least 1 minute"),
        ("59s", "at least 1 minute"),
        ("99999999999999999999d", "at most 100 years"),
    ],
)
def test_a_bad_duration_is_refused_with_exit_code_2(
    given: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))
    refused = runner.invoke(app, ["sessions", "prune", "--older-than", given])
    assert refused.exit_code == 2, refused.output
    assert refused.stderr.startswith("error: --older-than ")
    assert said in refused.stderr
    assert not (tmp_path / "aptix.db").exists()  # refused before the database is opened


def test_older_than_is_required(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))
    refused = runner.invoke(app, ["sessions", "prune"])
    assert refused.exit_code == 2
    assert "--older-than" in refused.output
