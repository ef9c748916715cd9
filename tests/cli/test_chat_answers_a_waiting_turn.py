"""``aptix chat --session-id`` on a session whose latest turn waits for the client.

``snapshots/sessions_by_8c404f5.db`` was written by Aptix 8c404f5 (schema 0003): session
``005afe00…``'s latest turn ran the calculator and waits for ``request_user_approval``
("Delete it?"). The chat asks that approval as it asks its own, then the turn goes on; a
turn waiting for a client tool a terminal cannot run is offered for cancelling.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from aptix.testing import reply
from aptix.testing.server import ScriptedOpenAIServer
from tests.cli.pty_chat import all_shown, answer_then_quit, chat_env, one_exchange, spawn_chat

SNAPSHOT = Path(__file__).parent / "snapshots" / "sessions_by_8c404f5.db"
SESSION = "005afe004b994a1bb32a67ea3856a2ac"


def _env(tmp_path: Path, base_url: str) -> dict[str, str]:
    copy = tmp_path / "old.db"
    if not copy.exists():
        shutil.copyfile(SNAPSHOT, copy)
    return {
        **chat_env(tmp_path, base_url, rows=40, columns=120),
        "NO_COLOR": "1",
        "APTIX_DATABASE_URL": f"sqlite+aiosqlite:///{copy}",
    }


def test_the_chat_asks_the_approval_a_continued_session_waits_for(tmp_path: Path) -> None:
    with ScriptedOpenAIServer([reply("Deleted, as approved.")]) as server:
        child = spawn_chat(_env(tmp_path, server.base_url), "--session-id", SESSION)
        try:
            child.expect_exact("approval needed:")
            child.expect_exact("Delete it?")
            answer_then_quit(child, "y", "Deleted, as approved.")
        finally:
            child.close()
        server.assert_complete()
        answered = [m for m in server.requests[0]["messages"] if m.get("tool_call_id") == "call_9"]
    assert [json.loads(m["content"]) for m in answered] == [{"approved": True}]
    assert "Traceback" not in all_shown(child)


def test_a_turn_waiting_for_a_client_tool_can_be_cancelled(tmp_path: Path) -> None:
    _env(tmp_path, "http://127.0.0.1:9/v1")  # the copy of the snapshot
    # The same turn, waiting for a client's own tool instead, as the old process stored it.
    with sqlite3.connect(tmp_path / "old.db") as db:
        turn_id, data = db.execute(
            "SELECT id, data FROM turns WHERE session_id = ? AND status = 'pending'", (SESSION,)
        ).fetchone()
        stored = json.loads(data)
        for call in (*stored["tool_calls"], *stored["pending_calls"]):
            if call["callId"] == "call_9":
                call |= {
                    "name": "browser_open",
                    "argumentsJson": '{"url": "https://example.com"}',
                    "isServerTool": False,
                    "wasExecuted": False,
                    "resultJson": None,
                }
        db.execute("UPDATE turns SET data = ? WHERE id = ?", (json.dumps(stored), turn_id))
    with ScriptedOpenAIServer([reply("Hello again.")]) as server:
        env = _env(tmp_path, server.base_url)
        child = spawn_chat(env, "--session-id", SESSION)
        try:
            child.expect_exact("client tool 'browser_open', which aptix chat cannot run")
            child.expect_exact("cancel that turn? [y/n]")
            child.sendline("y")
            child.expect_exact("Turn cancelled.")
            one_exchange(child, "hello after", "Hello again.")
        finally:
            child.close()
        server.assert_complete()
    shown = all_shown(child)
    assert "toolResults" not in shown
    assert "Traceback" not in shown
