"""``aptix chat`` when its database fails: one line, the chat goes on, the next message works.

PostgreSQL through a forwarder the test stops (refusing and cutting connections) and starts
again, the way a restart or a network blip looks to the chat. Each line is asked on a pty.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest
from typer.testing import CliRunner

from aptix.cli.main import app
from aptix.reasoner.record import TurnRecord
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import call, reply
from aptix.testing.server import Hold, ScriptedOpenAIServer
from tests.api.tcp_proxy import TcpProxy
from tests.cli.pty_chat import all_shown, chat_env, read_session_id, spawn_chat
from tests.databases import PG_HOST, PG_PORT, create_pg_database, drop_pg_database

SHOW_CURSOR, HIDE_CURSOR = "\x1b[?25h", "\x1b[?25l"


@pytest.fixture
def database() -> Iterator[str]:
    url = create_pg_database()
    yield url
    drop_pg_database(url)


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    forwarder = TcpProxy(PG_HOST, PG_PORT)
    forwarder.start()
    try:
        yield forwarder
    finally:
        forwarder.close()


def _env(tmp_path: Path, base_url: str, database: str, proxy: TcpProxy) -> dict[str, str]:
    proxied = database.replace(f"{PG_HOST}:{PG_PORT}", f"127.0.0.1:{proxy.port}")
    return {
        **chat_env(tmp_path, base_url, rows=40, columns=200),
        "NO_COLOR": "1",
        "APTIX_DATABASE_URL": proxied,
    }


def _turns(tmp_path: Path, database: str, session_id: str) -> list[TurnRecord]:
    async def read() -> list[TurnRecord]:
        settings = AptixSettings(data_dir=tmp_path, database_url=database, load_plugins=False)
        async with open_runtime(settings) as runtime:
            return await runtime.turns.list_turns(session_id, "local")

    return asyncio.run(read())


def _the_error_line(chat: pexpect.spawn) -> str:
    """The ``error:`` line the chat shows, read up to the prompt that follows it."""
    chat.expect(r"error:(?:\x1b\[[0-9;]*m)* ([^\r\n]*)\r\n")
    said = str(chat.match.group(1))
    chat.expect_exact("you>")
    return said


def _goes_on_once_it_is_back(chat: pexpect.spawn, proxy: TcpProxy) -> None:
    """The database back, the chat answers the next message, then quits cleanly."""
    proxy.start()
    chat.sendline("hello again")
    chat.expect_exact("Back again.")
    chat.expect_exact("you>")
    chat.sendline("/quit")
    chat.expect(pexpect.EOF)


def test_a_database_down_as_a_message_is_sent_is_one_line_and_the_chat_goes_on(
    tmp_path: Path, database: str, proxy: TcpProxy
) -> None:
    with ScriptedOpenAIServer([reply("Back again.")]) as server:
        chat = spawn_chat(_env(tmp_path, server.base_url, database, proxy))
        try:
            session_id = read_session_id(chat)
            chat.expect_exact("you>")
            proxy.stop()
            chat.sendline("hello while it is down")
            said = _the_error_line(chat)
            _goes_on_once_it_is_back(chat, proxy)
        finally:
            chat.close()
        server.assert_complete()
    shown = all_shown(chat)
    assert "Traceback" not in shown
    assert chat.exitstatus == 0
    assert said.startswith("The database at postgresql+asyncpg://"), said
    assert "check that the database server is running" in said
    assert "The message was not sent" in said, said
    # Nothing was claimed for the message the outage refused; the next one ran.
    assert [t.status for t in _turns(tmp_path, database, session_id)] == ["completed"]


@pytest.mark.parametrize("tool_ran", [False, True], ids=["before-a-tool", "after-a-tool"])
def test_a_database_lost_during_a_turn_ends_it_in_one_line_and_the_chat_goes_on(
    tmp_path: Path, database: str, proxy: TcpProxy, tool_ran: bool
) -> None:
    tool = [reply(None, call("agent_calculator", {"expression": "6*7"}, id="c1"))]
    script = [*(tool if tool_ran else []), Hold(reply("never shown")), reply("Back again.")]
    with ScriptedOpenAIServer(script) as server:
        chat = spawn_chat(_env(tmp_path, server.base_url, database, proxy))
        try:
            session_id = read_session_id(chat)
            chat.expect_exact("you>")
            chat.sendline("Work it out")
            server.wait_for_requests(len(script) - 1)  # the model holds its answer
            proxy.stop()  # the pooled connections are cut too
            server.release()
            said = _the_error_line(chat)
            _goes_on_once_it_is_back(chat, proxy)
        finally:
            chat.close()
        server.assert_complete()
    shown = all_shown(chat)
    assert "Traceback" not in shown
    assert chat.exitstatus == 0
    assert "database" in said, said
    before = shown[: shown.rfind(said)]
    assert before.rfind(SHOW_CURSOR) > before.rfind(HIDE_CURSOR)  # the spinner's cursor is back
    first, second = _turns(tmp_path, database, session_id)
    assert first.status == "error"
    # A call that ran keeps its outcome.
    assert [c["outcome"] for c in first.tool_calls] == (["succeeded"] if tool_ran else [])
    assert second.status == "completed"


def test_a_database_error_before_the_chat_begins_is_one_line_and_exit_code_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A SQLite file opened read-only: the runtime opens (its revision is at the head), and
    # creating the chat's session is the first write.
    database = tmp_path / "ro.db"
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("APTIX_SEMANTIC_MATCHING", "false")
    monkeypatch.setenv("APTIX_LLM_MODEL", "demo")  # never asked: the chat does not begin
    monkeypatch.setenv("APTIX_DATABASE_URL", f"sqlite+aiosqlite:///{database}")
    assert CliRunner().invoke(app, ["sessions", "list"]).exit_code == 0  # made and migrated
    monkeypatch.setenv(
        "APTIX_DATABASE_URL", f"sqlite+aiosqlite:///file:{database}?mode=ro&uri=true"
    )
    result = CliRunner().invoke(app, ["chat"], input="")
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: The database at sqlite+aiosqlite:///file:"), lines
    assert "attempt to write a readonly database" in lines[0]
