"""``aptix chat`` whose output goes away mid-turn: the turn is cut short, never an error.

A closed terminal window answers the chat's next write with EIO, and that write can come
before the chat has handled the SIGHUP; the reader of a pipe that leaves (``| head``) answers
with EPIPE. Either used to raise inside the turn's own text sink, so the turn was recorded
``error`` (or the chat exited 1 with the turn left running). The hang-up test holds SIGHUP
back from the chat (blocked across its exec), so the failed write is all it learns from.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pexpect

from aptix.testing import call, reply
from aptix.testing.server import Hold, ScriptedOpenAIServer, Step
from tests.cli.pty_chat import chat_env, read_session_id, stored_turns

#: Starts ``aptix chat`` with SIGHUP blocked: a blocked signal stays blocked across exec.
WITHOUT_SIGHUP = (
    "import os, signal, sys; "
    "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP}); "
    "os.execv(sys.executable, [sys.executable, '-m', 'aptix', 'chat'])"
)


def _wait(pid: int, seconds: float) -> int | None:
    """The wait status of ``pid`` once it has ended, or None if it still runs after ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.05)
    return None


def test_a_terminal_that_hangs_up_mid_turn_leaves_the_turn_interrupted(tmp_path: Path) -> None:
    # The model answers only once the terminal is gone: its text is written to a dead pty.
    script: list[Step] = [Hold(reply("Streaming into a closed window " * 20))]
    with ScriptedOpenAIServer(script) as server:
        env = chat_env(tmp_path, server.base_url, rows=40, columns=120)
        child = pexpect.spawn(
            sys.executable, ["-c", WITHOUT_SIGHUP], env=env, encoding="utf-8", timeout=30
        )
        status = None
        try:
            session_id = read_session_id(child)
            child.expect_exact("you>")
            child.sendline("Tell me a long story")
            server.wait_for_requests(1)
            child.expect_exact("thinking")  # the spinner turns: the turn runs
            os.close(child.child_fd)  # the window is closed
            server.release()
            status = _wait(child.pid, 30)
        finally:
            if status is None:
                os.kill(child.pid, signal.SIGKILL)
                os.waitpid(child.pid, 0)
    assert status is not None, "the chat did not end"
    # It ends as SIGHUP would (still blocked here, so by the exit code the signal stands for).
    assert os.WIFEXITED(status)
    assert os.WEXITSTATUS(status) == 128 + signal.SIGHUP
    [turn] = stored_turns(tmp_path, session_id)
    assert turn.status == "interrupted", turn.result
    logged = (tmp_path / "chat.log").read_text(encoding="utf-8")
    assert "OSError" not in logged
    assert " ERROR " not in logged


def test_a_reader_of_the_output_that_leaves_mid_turn_ends_the_chat_as_sigpipe(
    tmp_path: Path,
) -> None:
    # The first answer's text meets the closed pipe; the turn would go on to the held second.
    script: list[Step] = [
        reply("Working on it.", call("agent_calculator", {"expression": "2*(3+4)"})),
        Hold(reply("never")),
    ]
    with ScriptedOpenAIServer(script) as server:
        env = chat_env(tmp_path, server.base_url, rows=40, columns=120)
        command = [sys.executable, "-m", "aptix", "chat"]
        pipe = subprocess.PIPE
        with subprocess.Popen(command, env=env, stdin=pipe, stdout=pipe, stderr=pipe) as chat:
            assert chat.stdin is not None
            assert chat.stdout is not None
            shown = b""
            while not shown.endswith(b"you> "):
                shown += os.read(chat.stdout.fileno(), 4096)
            chat.stdout.close()  # the reader leaves, after the prompt and before the answer
            chat.stdin.write(b"calculate 2*(3+4)\n")
            chat.stdin.flush()
            try:
                chat.wait(timeout=60)
            finally:
                chat.kill()
                server.release()
            errors = chat.stderr.read().decode() if chat.stderr else ""
    session_id = shown.decode().split("session ", 1)[1].split(".", 1)[0]
    assert chat.returncode == -signal.SIGPIPE, errors  # the shell reports 141
    assert "Traceback" not in errors
    assert errors.startswith("Ended by SIGPIPE: standard output was closed. The running turn")
    assert f"aptix chat --session-id {session_id} continues the session." in errors
    [turn] = stored_turns(tmp_path, session_id)
    assert turn.status == "interrupted", turn.result
