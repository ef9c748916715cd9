"""``aptix chat`` on a pseudo-terminal, for the tests that read what a person would see."""

from __future__ import annotations

import asyncio
import io
import os
import sys
from pathlib import Path

import pexpect

from aptix.reasoner.record import TurnRecord
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings


def chat_env(tmp_path: Path, base_url: str, *, rows: int, columns: int) -> dict[str, str]:
    """The environment of a chat on the scripted model at ``base_url``, ``rows`` x ``columns``."""
    return {
        **os.environ,
        "APTIX_DATA_DIR": str(tmp_path),
        "APTIX_LLM_BASE_URL": base_url,
        "APTIX_LLM_MODEL": "scripted",
        "APTIX_LLM_MAX_RETRIES": "0",
        "APTIX_SEMANTIC_MATCHING": "false",
        "TERM": "xterm",
        "COLUMNS": str(columns),  # Rich reads these before the pty's size
        "LINES": str(rows),
        "PROMPT_TOOLKIT_NO_CPR": "1",  # pexpect does not answer cursor-position requests
    }


def spawn_chat(env: dict[str, str], *args: str) -> pexpect.spawn:
    """``aptix chat *args`` on a pty of the size ``env`` states, everything shown kept."""
    child = pexpect.spawn(
        sys.executable,
        ["-m", "aptix", "chat", *args],
        env=env,
        encoding="utf-8",
        timeout=30,
        dimensions=(int(env["LINES"]), int(env["COLUMNS"])),
    )
    child.logfile_read = io.StringIO()
    return child


def all_shown(child: pexpect.spawn) -> str:
    """Everything ``child`` wrote to its terminal so far."""
    log = child.logfile_read
    assert isinstance(log, io.StringIO)
    return log.getvalue()


def read_session_id(child: pexpect.spawn) -> str:
    """The id of the session the chat names as it starts."""
    child.expect(r"session ([0-9a-f-]+)\.")
    return str(child.match.group(1))


def one_exchange(child: pexpect.spawn, message: str, last_words: str) -> None:
    """Send ``message``, wait for the answer's ``last_words``, then quit."""
    child.expect_exact("you>")
    child.sendline(message)
    child.expect_exact(last_words)
    quit_at_prompt(child)


def answer_then_quit(child: pexpect.spawn, answer: str, last_words: str) -> None:
    """Answer the approval question ``answer``, wait for the turn's ``last_words``, then quit."""
    child.expect_exact("approve? [y/n]")
    child.sendline(answer)
    child.expect_exact(last_words)
    quit_at_prompt(child)


def quit_at_prompt(child: pexpect.spawn) -> None:
    """Wait for the prompt, send ``/quit`` and wait for the chat to end."""
    child.expect_exact("you>")
    child.sendline("/quit")
    child.expect(pexpect.EOF)


def stored_turns(data_dir: Path, session_id: str) -> list[TurnRecord]:
    """The turns of the local session ``session_id`` as stored under ``data_dir``."""

    async def read() -> list[TurnRecord]:
        async with open_runtime(AptixSettings(data_dir=data_dir)) as runtime:
            return await runtime.turns.list_turns(session_id, "local")

    return asyncio.run(read())
