"""``aptix sessions prune`` beside a live ``aptix serve`` on the same database (review r4 F3).

A server runs a turn (its model holds the answer) and keeps another waiting for the user's
approval while the command, another process, deletes the old sessions: those two sessions
stay, aged as they are, and both turns finish afterwards as if nothing happened.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from sqlalchemy import Table, update

from aptix.db.engine import open_database
from aptix.db.types import utc_now
from aptix.reasoner.tables import TurnRow
from aptix.sessions.tables import SessionRow
from aptix.testing import call, reply
from aptix.testing.server import Hold, ScriptedOpenAIServer
from tests.api.live import serve_isolated
from tests.databases import create_pg_database, drop_pg_database


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'shared.db'}"
        return
    url = create_pg_database()
    try:
        yield url
    finally:
        drop_pg_database(url)


def _age_everything(url: str, days: int) -> None:
    """Every session and turn last changed ``days`` ago, the running turn's included."""

    async def main() -> None:
        database = await open_database(url)
        then = utc_now() - timedelta(days=days)
        try:

            def write(tx: Any) -> None:
                for table in (cast(Table, SessionRow.__table__), cast(Table, TurnRow.__table__)):
                    tx.execute(update(table).values(updated_at=then))

            await database.run(write)
        finally:
            await database.close()

    asyncio.run(main())


def _prune(url: str, data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith("APTIX_")},
        "APTIX_DATA_DIR": str(data_dir),
        "APTIX_DATABASE_URL": url,
        "APTIX_LOAD_PLUGINS": "false",
        "APTIX_SEMANTIC_MATCHING": "false",
    }
    return subprocess.run(
        [sys.executable, "-m", "aptix", "sessions", "prune", *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_prune_keeps_the_sessions_a_server_is_running_or_waiting_on(
    database_url: str, tmp_path: Path
) -> None:
    with ScriptedOpenAIServer() as llm:
        llm.add(
            reply("hello"),
            reply("from the chat endpoint"),
            reply(None, call("request_user_approval", {"prompt": "Go?"}, id="u1")),
            Hold(reply("held answer")),
            reply("approved and done"),
        )
        env = {
            "APTIX_LLM_BASE_URL": llm.base_url,
            "APTIX_LLM_MODEL": "scripted",
            "APTIX_LLM_MAX_RETRIES": "0",
            "APTIX_DATABASE_URL": database_url,
        }
        with serve_isolated(tmp_path / "server", tmp_path / "serve.log", **env) as (url, _):
            execute = f"{url}/v1/agent/execute"
            done = httpx.post(execute, json={"instruction": "hi"}, timeout=30).json()
            assert done["kind"] == "ok", done
            chat = httpx.post(
                f"{url}/v1/chat/completions",
                json={"model": "aptix-general", "messages": [{"role": "user", "content": "hey"}]},
                timeout=30,
            )
            assert chat.status_code == 200, chat.text
            stateless = chat.headers["X-Aptix-Session"]
            waiting = httpx.post(execute, json={"instruction": "ask me"}, timeout=30).json()
            assert waiting["kind"] == "tool-only", waiting
            running_sid = httpx.post(f"{url}/v1/sessions", json={}).json()["sessionId"]
            answers: list[httpx.Response] = []
            held = threading.Thread(
                target=lambda: answers.append(
                    httpx.post(
                        execute, json={"sessionId": running_sid, "instruction": "go"}, timeout=90
                    )
                )
            )
            held.start()
            llm.wait_for_requests(4)
            _age_everything(database_url, days=40)

            counted = _prune(database_url, tmp_path / "cli", "--older-than", "30d", "--dry-run")
            pruned = _prune(database_url, tmp_path / "cli", "--older-than", "30d", "--json")

            assert counted.returncode == 0, counted.stderr
            assert counted.stdout.startswith("Would delete 2 sessions and 2 turns last used")
            assert pruned.returncode == 0, pruned.stderr
            shown = json.loads(pruned.stdout)
            assert (shown["sessions"], shown["turns"], shown["kept"]) == (2, 2, 2)
            assert "2 sessions last used before then are kept" in pruned.stderr
            for gone in (done["sessionId"], stateless):
                assert httpx.get(f"{url}/v1/sessions/{gone}").status_code == 404
            running = httpx.get(f"{url}/v1/sessions/{running_sid}").json()
            assert [t["status"] for t in running["turns"]] == ["running"]

            llm.release()
            held.join(timeout=60)
            [answer] = answers
            assert answer.status_code == 200, answer.text
            assert (answer.json()["kind"], answer.json()["text"]) == ("ok", "held answer")
            approved = httpx.post(
                execute,
                json={
                    "sessionId": waiting["sessionId"],
                    "toolResults": [{"callId": "u1", "result": {"approved": True}}],
                },
                timeout=30,
            )
            assert approved.status_code == 200, approved.text
            assert approved.json()["text"] == "approved and done"
            # The stateless client's next request starts afresh: its old session is gone.
            llm.add(reply("a new start"))
            again = httpx.post(
                f"{url}/v1/chat/completions",
                json={
                    "model": "aptix-general",
                    "messages": [
                        {"role": "user", "content": "hey"},
                        {"role": "assistant", "content": "from the chat endpoint"},
                        {"role": "user", "content": "more"},
                    ],
                },
                timeout=30,
            )
            assert again.status_code == 200, again.text
            assert again.headers["X-Aptix-Session"] != stateless
        llm.assert_complete()
