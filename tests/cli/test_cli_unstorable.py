"""Text a person types into the CLI with a NUL or a lone surrogate: one message, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest
from typer.testing import CliRunner

from aptix.cli.main import app
from aptix.testing import reply
from aptix.testing.server import ScriptedOpenAIServer
from tests.cli.pty_chat import all_shown, chat_env, spawn_chat

runner = CliRunner()

NUL = "NUL characters (\\u0000) are not accepted in text"
SURROGATE = (
    "Lone surrogate characters (\\ud800-\\udfff without their pair) are not accepted in text"
)
# What a shell passes for the byte 0xff: not UTF-8, so Python keeps it as a lone surrogate.
BAD_BYTE = b"\xff".decode("utf-8", "surrogateescape")
# What the person is told about it: the byte they sent, not Python's stand-in for it.
NOT_UTF8 = "The byte 0xff is not valid UTF-8; text must be UTF-8"


@pytest.fixture(autouse=True)
def _isolated_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))


@pytest.mark.parametrize(
    ("command", "refused"),
    [
        (["sessions", "create", "--org", f"o{BAD_BYTE}"], f"{NOT_UTF8} (found in --org)."),
        (["sessions", "create", "--title", "a\x00b"], f"{NUL} (found in --title)."),
        (["sessions", "create", "--mode", f"m{BAD_BYTE}"], f"{NOT_UTF8} (found in --mode)."),
        (
            ["sessions", "create", "--title", "caf\udce9"],
            NOT_UTF8.replace("ff", "e9") + " (found in --title).",
        ),
        # Only an in-process caller can pass a real lone surrogate (argv is bytes).
        (["sessions", "create", "--title", "a\ud800"], f"{SURROGATE} (found in --title)."),
        (["sessions", "list", "--user", "u\x00"], f"{NUL} (found in --user)."),
        (["sessions", "show", f"s{BAD_BYTE}"], f"{NOT_UTF8} (found in SESSION_ID)."),
        (
            ["tools", "call", "agent_calculator", '{"expression": "1"}', "--user", f"u{BAD_BYTE}"],
            f"{NOT_UTF8} (found in --user).",
        ),
        (
            ["tools", "call", "agent_calculator", "--session-id", "s\x00"],
            f"{NUL} (found in --session-id).",
        ),
        (["chat", "--session-id", f"s{BAD_BYTE}"], f"{NOT_UTF8} (found in --session-id)."),
        (["chat", "--mode", "m\x00"], f"{NUL} (found in --mode)."),
        (["workflows", "match", f"hello {BAD_BYTE}"], f"{NOT_UTF8} (found in MESSAGE)."),
        (["workflows", "match", "hello \x00"], f"{NUL} (found in MESSAGE)."),
        (["workflows", "match", "hi", "--org", f"o{BAD_BYTE}"], f"{NOT_UTF8} (found in --org)."),
        (["workflows", "list", "--org", f"o{BAD_BYTE}"], f"{NOT_UTF8} (found in --org)."),
        (["workflows", "show", f"w{BAD_BYTE}"], f"{NOT_UTF8} (found in WORKFLOW_ID)."),
        (["workflows", "show", "w", "--org", "o\x00"], f"{NUL} (found in --org)."),
    ],
    ids=[
        "create-org",
        "create-title",
        "create-mode",
        "create-title-latin1",
        "create-title-lone-surrogate",
        "list-user",
        "show-id",
        "call-user",
        "call-session",
        "chat-session",
        "chat-mode",
        "match-message",
        "match-message-nul",
        "match-org",
        "workflows-list-org",
        "workflows-show-id",
        "workflows-show-org",
    ],
)
def test_an_unstorable_option_is_one_line_and_exit_2(
    command: list[str], refused: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APTIX_DATABASE_URL", database_url)
    monkeypatch.setenv("APTIX_LLM_MODEL", "demo")
    result = runner.invoke(app, command)
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: {refused}\n"
    assert result.exception is None or isinstance(result.exception, SystemExit)
    listed = runner.invoke(app, ["sessions", "list", "--json"])
    assert json.loads(listed.stdout) == []  # nothing was stored


def _chat_env(tmp_path: Path, base_url: str, database_url: str) -> dict[str, str]:
    env = chat_env(tmp_path, base_url, rows=40, columns=200)
    # As in an en_US.UTF-8 locale, stdin decodes strictly: a bad byte must not end the chat.
    return {**env, "APTIX_DATABASE_URL": database_url, "PYTHONIOENCODING": "utf-8:strict"}


def test_piped_chat_lines_with_nul_or_a_bad_byte_are_refused_and_the_chat_goes_on(
    tmp_path: Path, database_url: str
) -> None:
    with ScriptedOpenAIServer([reply("Hello back.")]) as server:
        env = _chat_env(tmp_path, server.base_url, database_url)
        done = subprocess.run(
            [sys.executable, "-m", "aptix", "chat"],
            input=b"hi\x00there\nab\xffc\nhello\n/quit\n",
            env=env,
            capture_output=True,
            timeout=60,
        )
        out, err = done.stdout.decode(), done.stderr.decode()
        assert done.returncode == 0, out + err
        assert "Traceback" not in out + err
        assert f"error: {NUL}; the line was not sent." in out
        assert f"error: {NOT_UTF8}; the line was not sent." in out
        assert "Hello back." in out
        server.assert_complete()
        assert server.requests[0]["messages"][-1] == {"role": "user", "content": "hello"}


def test_a_bad_byte_typed_at_the_chat_prompt_is_refused_and_the_chat_goes_on(
    tmp_path: Path, database_url: str
) -> None:
    with ScriptedOpenAIServer([reply("Hello back.")]) as server:
        env = chat_env(tmp_path, server.base_url, rows=40, columns=200)
        child = spawn_chat({**env, "APTIX_DATABASE_URL": database_url})
        try:
            child.expect_exact("you>")
            os.write(child.child_fd, b"ab\xffc\r")
            child.expect_exact("the line was not sent.")
            child.expect_exact("you>")
            child.sendline("hello")
            child.expect_exact("Hello back.")
            child.expect_exact("you>")
            child.sendline("/quit")
            child.expect(pexpect.EOF)
        finally:
            child.close()
        shown = all_shown(child)
        assert "Traceback" not in shown
        assert NOT_UTF8 in shown
        assert child.exitstatus == 0, shown
        server.assert_complete()
        assert server.requests[0]["messages"][-1] == {"role": "user", "content": "hello"}
