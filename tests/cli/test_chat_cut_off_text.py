"""``aptix chat`` on a pty: a turn cut short tells the truth on screen and on record.

Review r6 (round 67). F2: the words the model streamed before Ctrl-C (or SIGTERM, SIGHUP)
stayed on screen under ``agent>`` exactly as a finished answer does, while the turn was
stored with ``text: null``, so the resumed chat, HTTP and the console never showed what had
been said. Now the fragment is marked cut off where it stands, and kept as the turn's text
(the resumed chat labels it partial). F1: a call whose outcome a ``kill -9`` of the chat left
unknown was recorded as "The server stopped while this call ran", though no server ran it.

The scripted model streams part of its answer and holds the rest until released (never,
here), so nothing depends on the machine's speed.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pexpect
import pyte

from aptix.testing import call, reply
from aptix.testing.server import Hold, ScriptedOpenAIServer
from tests.cli.pty_chat import all_shown, chat_env, read_session_id, spawn_chat, stored_turns

ANSWER = reply("I will now delete it. word0 word1 word2 word3 word4 word5 word6")
#: Streamed before the model holds: the words up to "word2", as the record must keep them.
CUT = Hold(ANSWER, after_words=8)
STREAMED = "I will now delete it. word0 word1 word2 "
NAP_TOOL = '''
import asyncio
import pathlib

import aptix


@aptix.tool(usage="Naps; the test kills the chat meanwhile.")
async def nap() -> str:
    """Says it started, then sleeps."""
    pathlib.Path(__file__).with_name("napping").touch()
    await asyncio.sleep(120)
    return "rested"
'''


ROWS, COLUMNS = 40, 200
SAID = "agent> I will now delete it. word0 word1 word2"


def _env(tmp_path: Path, base_url: str) -> dict[str, str]:
    return {**chat_env(tmp_path, base_url, rows=ROWS, columns=COLUMNS), "NO_COLOR": "1"}


def _screen(shown: str) -> list[str]:
    """The rows a person sees once the chat has written ``shown`` (pyte, a VT100 emulator)."""
    screen = pyte.Screen(COLUMNS, ROWS)
    pyte.Stream(screen).feed(shown)
    return [row.rstrip() for row in screen.display if row.strip()]


def _after(rows: list[str], first: str) -> list[str]:
    """The row starting with ``first`` and the two rows below it."""
    [at] = [i for i, row in enumerate(rows) if row.startswith(first)]
    return rows[at : at + 3]


def _spawn(env: dict[str, str], *args: str) -> pexpect.spawn:
    child = spawn_chat(env, *args)
    child.timeout = 120  # start-up on a loaded machine; nothing here waits on a clock
    return child


def _resumed(env: dict[str, str], session_id: str) -> str:
    """What ``aptix chat --session-id`` shows of the session before its prompt."""
    child = _spawn(env, "--session-id", session_id)
    try:
        read_session_id(child)  # named after the turns shown
        child.expect_exact("you>")
        shown = all_shown(child)
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    return shown


def test_ctrl_c_mid_answer_marks_the_text_cut_off_and_keeps_it(tmp_path: Path) -> None:
    with ScriptedOpenAIServer([CUT]) as server:
        env = _env(tmp_path, server.base_url)
        child = _spawn(env)
        try:
            session_id = read_session_id(child)
            child.expect_exact("you>")
            child.sendline("Delete it")
            child.expect_exact("word2")  # streamed; the model holds the rest
            child.sendintr()
            child.expect_exact("Turn cancelled.")
            child.expect_exact("you>")
            child.sendeof()
            child.expect(pexpect.EOF)
        finally:
            child.close()
        assert _after(_screen(all_shown(child)), SAID) == [
            SAID,  # the words streamed, kept where they stand, then marked cut off
            "       (cut off: turn cancelled; partial text, not a finished answer)",
            "Turn cancelled. The chat goes on; Ctrl-C again quits.",
        ]
        [turn] = stored_turns(tmp_path, session_id)
        assert (turn.status, turn.text) == ("cancelled", STREAMED)
        again = _screen(_resumed(env, session_id))
    assert _after(again, "agent> (turn ") == [
        "agent> (turn cancelled: it was cancelled and ended without a finished answer)",
        "  partial text, not a finished answer:",
        "    I will now delete it. word0 word1 word2",
    ]


def test_sigterm_mid_answer_marks_the_text_cut_off_and_keeps_it(tmp_path: Path) -> None:
    with ScriptedOpenAIServer([CUT]) as server:
        env = _env(tmp_path, server.base_url)
        child = _spawn(env)
        try:
            session_id = read_session_id(child)
            child.expect_exact("you>")
            child.sendline("Delete it")
            child.expect_exact("word2")
            os.kill(child.pid, signal.SIGTERM)
            child.expect(pexpect.EOF)
        finally:
            child.close()
        rows = _after(_screen(all_shown(child)), SAID)
        assert rows[:2] == [
            SAID,
            "       (cut off: ended by SIGTERM; partial text, not a finished answer)",
        ]
        assert rows[2].startswith("Ended by SIGTERM. The running turn was cut short")
        again = _screen(_resumed(env, session_id))
        [turn] = stored_turns(tmp_path, session_id)
    assert turn.text == STREAMED
    shown = _after(again, "agent> (turn ")
    assert shown[0].startswith("agent> (turn interrupted: ")
    assert shown[1:] == [
        "  partial text, not a finished answer:",
        "    I will now delete it. word0 word1 word2",
    ]


def test_a_call_cut_short_by_kill_9_of_the_chat_names_no_server(tmp_path: Path) -> None:
    tools = tmp_path / "nap_tool.py"
    tools.write_text(NAP_TOOL)
    napping = tmp_path / "napping"
    with ScriptedOpenAIServer([reply("Napping now.", call("nap", {}, id="n1"))]) as server:
        env = {**_env(tmp_path, server.base_url), "APTIX_TOOL_MODULES": str(tools)}
        child = _spawn(env)
        try:
            session_id = read_session_id(child)
            child.expect_exact("you>")
            child.sendline("Take a nap")
            deadline = time.monotonic() + 60
            while not napping.exists():
                assert time.monotonic() < deadline, "the tool never started"
                time.sleep(0.05)
            child.kill(signal.SIGKILL)  # no server anywhere: only this chat ran the turn
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        again = " ".join(_screen(_resumed(env, session_id)))
        [turn] = stored_turns(tmp_path, session_id)
    [nap] = turn.tool_calls
    assert (turn.status, nap["outcome"]) == ("interrupted", "unknown")
    message = nap["errorMessage"]
    assert message.startswith("The process running this turn stopped")
    assert "server" not in message.lower()
    assert "server" not in " ".join(turn.warnings).lower()
    assert "nap → unknown: The process running this turn stopped" in again
