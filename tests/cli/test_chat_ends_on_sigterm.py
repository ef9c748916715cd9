"""``aptix chat`` ended by SIGTERM or SIGHUP, on a real terminal: it is left as it was found.

The chat starts under ``sh`` once the test has read the terminal's modes from the pty's
slave side (sh waits for a line first), so "before" is the terminal the chat was given. The
scripted model holds its answer until released (never, here): the turn runs as long as the
test needs, whatever the machine's speed.
"""

from __future__ import annotations

import asyncio
import io
import os
import signal
import subprocess
import sys
import termios
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pexpect
import pytest

from aptix.reasoner.record import TurnRecord
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import call, reply
from aptix.testing.server import Hold, ScriptedOpenAIServer
from tests.cli.pty_chat import all_shown, chat_env, read_session_id, spawn_chat

APPROVAL = reply(None, call("request_user_approval", {"prompt": "Charge 59.97?"}))
SHOW_CURSOR, HIDE_CURSOR = "\x1b[?25h", "\x1b[?25l"
PASTE_ON, PASTE_OFF = "\x1b[?2004h", "\x1b[?2004l"


@dataclass
class Ended:
    """How a chat ended: its terminal's modes before, at a question and after, and its output."""

    before: list[object]
    raw: list[object]
    after: list[object]
    signalstatus: int | None
    shown: str


class _Terminal:
    """``aptix chat`` on a pty, and the pty's slave side, opened before the chat starts."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        chat = [sys.executable, "-m", "aptix", "chat", *args]
        self.child = pexpect.spawn(
            "/bin/sh",
            ["-c", 'tty; read -r _; exec "$@"', "sh", *chat],
            env=env,
            encoding="utf-8",
            timeout=30,
        )
        self.child.logfile_read = io.StringIO()
        self.child.expect(r"(/dev/\S+)\r\n")
        self._slave: int | None = os.open(self.child.match.group(1), os.O_RDWR | os.O_NOCTTY)
        self.before = self.modes()
        self.child.sendline("")  # sh stops waiting: the chat starts on the modes just read

    def modes(self) -> list[object]:
        """The terminal's modes, read on the slave side as ``stty`` would."""
        assert self._slave is not None
        return termios.tcgetattr(self._slave)

    def end_with(self, sig: int, raw: list[object]) -> Ended:
        """Send ``sig`` to the chat; the modes it leaves once it is gone, and all it showed."""
        os.kill(self.child.pid, sig)
        self.child.wait()  # it writes little on its way out: the pty's buffer holds it
        after = self.modes()
        self.close_slave()  # the pty's end is read to EOF only once no slave side is open
        self.child.expect(pexpect.EOF)
        return Ended(self.before, raw, after, self.child.signalstatus, all_shown(self.child))

    def close_slave(self) -> None:
        """Close the slave side held since the start."""
        if self._slave is not None:
            os.close(self._slave)
            self._slave = None


@contextmanager
def _chat(env: dict[str, str], *args: str) -> Iterator[_Terminal]:
    terminal = _Terminal(env, *args)
    try:
        yield terminal
    finally:
        terminal.close_slave()
        terminal.child.close(force=True)


def _env(tmp_path: Path, base_url: str) -> dict[str, str]:
    return {**chat_env(tmp_path, base_url, rows=40, columns=160), "NO_COLOR": "1"}


def _assert_left_as_found(ended: Ended, sig: int) -> None:
    lflag = 3
    assert ended.before[lflag] & termios.ECHO
    assert ended.before[lflag] & termios.ICANON
    assert not ended.raw[lflag] & termios.ECHO  # raw while the chat read a line
    assert ended.after == ended.before  # echo, icanon, isig, icrnl: every mode as it was
    shown = ended.shown
    assert HIDE_CURSOR in shown
    assert shown.rfind(SHOW_CURSOR) > shown.rfind(HIDE_CURSOR)
    assert PASTE_ON in shown
    assert shown.rfind(PASTE_OFF) > shown.rfind(PASTE_ON)
    assert ended.signalstatus == sig  # the shell reports 128 + the signal's number
    assert f"Ended by {signal.Signals(sig).name}." in shown
    assert "Traceback" not in shown


def _turns(tmp_path: Path, session_id: str) -> list[TurnRecord]:
    async def read() -> list[TurnRecord]:
        async with open_runtime(AptixSettings(data_dir=tmp_path)) as runtime:
            return await runtime.turns.list_turns(session_id, "local")

    return asyncio.run(read())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_at_the_prompt_gives_the_terminal_back(tmp_path: Path, sig: int) -> None:
    with ScriptedOpenAIServer() as server, _chat(_env(tmp_path, server.base_url)) as terminal:
        session_id = read_session_id(terminal.child)
        terminal.child.expect_exact("you>")
        ended = terminal.end_with(sig, terminal.modes())
    _assert_left_as_found(ended, sig)
    assert f"aptix chat --session-id {session_id} continues the session." in ended.shown


def test_sigterm_while_a_turn_runs_shows_the_cursor_and_records_it_interrupted(
    tmp_path: Path,
) -> None:
    server = ScriptedOpenAIServer([Hold(reply("never shown"))])
    with server, _chat(_env(tmp_path, server.base_url)) as terminal:
        chat = terminal.child
        session_id = read_session_id(chat)
        chat.expect_exact("you>")
        raw = terminal.modes()
        chat.sendline("Take your time")
        server.wait_for_requests(1)  # the turn waits for the model, its spinner turning
        chat.expect_exact("thinking")
        ended = terminal.end_with(signal.SIGTERM, raw)
    _assert_left_as_found(ended, signal.SIGTERM)
    assert ended.shown.rfind(HIDE_CURSOR) > ended.shown.rfind("Take your time")  # the spinner
    assert "The running turn was cut short" in ended.shown
    assert [t.status for t in _turns(tmp_path, session_id)] == ["interrupted"]


def test_sigterm_at_an_approval_question_leaves_the_turn_pending_for_the_next_chat(
    tmp_path: Path,
) -> None:
    with ScriptedOpenAIServer([APPROVAL, reply("Charged.")]) as server:
        env = _env(tmp_path, server.base_url)
        with _chat(env) as terminal:
            session_id = read_session_id(terminal.child)
            terminal.child.expect_exact("you>")
            terminal.child.sendline("Charge me")
            terminal.child.expect_exact("approve? [y/n]")
            ended = terminal.end_with(signal.SIGTERM, terminal.modes())
        _assert_left_as_found(ended, signal.SIGTERM)
        assert "The turn waiting for your answer stays pending" in ended.shown
        assert [t.status for t in _turns(tmp_path, session_id)] == ["pending"]

        again = spawn_chat(env, "--session-id", session_id)  # the approval is asked again
        try:
            again.expect_exact("Charge 59.97?")
            again.expect_exact("approve? [y/n]")
            again.sendline("y")
            again.expect_exact("Charged.")
            again.expect_exact("you>")
            again.sendline("/quit")
            again.expect(pexpect.EOF)
        finally:
            again.close()
        server.assert_complete()
    assert again.exitstatus == 0
    assert [t.status for t in _turns(tmp_path, session_id)] == ["completed"]


def test_sigterm_to_a_chat_reading_piped_input_ends_it_by_sigterm(tmp_path: Path) -> None:
    with ScriptedOpenAIServer() as server:
        command = [sys.executable, "-m", "aptix", "chat"]
        env = _env(tmp_path, server.base_url)
        pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        with subprocess.Popen(command, env=env, stdin=subprocess.PIPE, text=True, **pipes) as chat:
            assert chat.stdout is not None
            while "Aptix chat" not in chat.stdout.readline():
                pass
            chat.send_signal(signal.SIGTERM)
            # The end of the input may come first: either way it ends by the signal, once.
            out, err = chat.communicate(timeout=30)
    assert chat.returncode == -signal.SIGTERM, err
    assert "Traceback" not in err
    assert out.count("Ended by SIGTERM.") <= 1
