"""``aptix chat`` on a real terminal (a pty with TERM=xterm): what a person at the keyboard sees.

The scripted server holds its slow answer until the test releases it (it never does here), so
nothing depends on how fast the machine is: the test waits for the request to arrive, then
presses Ctrl-C.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from aptix.testing import call, reply
from aptix.testing.server import Hold, ScriptedOpenAIServer
from tests.cli.pty_chat import (
    all_shown,
    answer_then_quit,
    chat_env,
    one_exchange,
    read_session_id,
    spawn_chat,
    stored_turns,
)

UP = "\x1b[A"
VERBATIM = "Use list[str] here; [bold] and [/x] stay as typed."


def _terminal_env(tmp_path: Path, base_url: str) -> dict[str, str]:
    return {**chat_env(tmp_path, base_url, rows=40, columns=200), "NO_COLOR": "1"}


def _user_text(request: dict[str, object]) -> object:
    messages = request["messages"]
    assert isinstance(messages, list)
    return [m for m in messages if m["role"] == "user"][-1]["content"]


def test_chat_verbatim_text_history_ctrl_c_and_mode_list(tmp_path: Path) -> None:
    script = [reply(VERBATIM), Hold(reply("never shown")), reply("Still here.")]
    with ScriptedOpenAIServer(script) as server:
        child = spawn_chat(_terminal_env(tmp_path, server.base_url))
        try:
            session_id = read_session_id(child)
            child.expect_exact("you>")
            child.sendline("Say it back")
            child.expect_exact(VERBATIM)  # streamed, then rendered: never read as markup
            child.expect_exact("you>")

            child.send(UP)  # the previous line comes back; Enter sends it again
            child.send("\r")
            server.wait_for_requests(2)
            assert _user_text(server.requests[1]) == "Say it back"

            child.sendintr()  # the held turn is cancelled, the chat stays open
            child.expect_exact("Turn cancelled.")
            child.expect_exact("you>")
            child.sendline("Are you there?")
            child.expect_exact("Still here.")
            child.expect_exact("you>")

            child.sendline("/mode")
            child.expect(r"\* (?:\x1b\[[0-9;]*m)*(\w+)")  # the current mode, marked
            current = child.match.group(1)
            child.expect_exact("you>")
            child.sendeof()
            child.expect(pexpect.EOF)
        finally:
            child.close()
        assert child.exitstatus == 0
        server.assert_complete()
    assert current == "general"
    assert [t.status for t in stored_turns(tmp_path, session_id)] == [
        "completed",
        "cancelled",
        "completed",
    ]
    assert (tmp_path / "chat_history").is_file()


def test_chat_history_survives_a_restart_and_tab_completes(tmp_path: Path) -> None:
    with ScriptedOpenAIServer([reply("One."), reply("Two.")]) as server:
        env = _terminal_env(tmp_path, server.base_url)
        first = spawn_chat(env)
        try:
            one_exchange(first, "remember this line", "One.")
        finally:
            first.close()
        second = spawn_chat(env)
        try:
            second.expect_exact("you>")
            second.send(UP + UP)  # past "/quit" to the message
            second.send("\r")
            second.expect_exact("Two.")
            second.expect_exact("you>")
            second.send("/hel\t")  # Tab completes the command
            second.send("\r")
            second.expect_exact("Commands: /mode, /modes")
            second.expect_exact("you>")
            second.sendline("/quit")
            second.expect(pexpect.EOF)
        finally:
            second.close()
        assert _user_text(server.requests[1]) == "remember this line"


def test_start_up_and_trace_exporter_lines_go_to_the_log_file(tmp_path: Path) -> None:
    collector = _closed_port_url().removesuffix("/v1")  # nothing listens: the exporter warns
    with ScriptedOpenAIServer([reply("Traced.")]) as server:
        env = {
            **_terminal_env(tmp_path, server.base_url),
            "APTIX_LOG_LEVEL": "DEBUG",  # start-up lines too
            "APTIX_OTEL": "true",
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector,
            "OTEL_BSP_SCHEDULE_DELAY": "50",
        }
        child = spawn_chat(env)
        try:
            one_exchange(child, "hello", "Traced.")
        finally:
            child.close()
    shown = all_shown(child)
    logged = (tmp_path / "chat.log").read_text(encoding="utf-8")
    assert " DEBUG aptix" in logged  # the runtime's start-up
    assert " opentelemetry" in logged  # the exporter's warning that it could not send
    for level in (" DEBUG ", " INFO ", " WARNING "):
        assert level not in shown
    assert child.exitstatus == 0


def _closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize(
    ("failure", "what_to_check"),
    [
        ("401", "check APTIX_LLM_API_KEY"),
        ("unreachable", "is APTIX_LLM_BASE_URL right?"),
        ("timeout", "should APTIX_LLM_TIMEOUT_SECONDS be higher?"),
    ],
)
def test_a_model_error_is_one_line_that_says_what_to_check(
    tmp_path: Path, failure: str, what_to_check: str
) -> None:
    with ScriptedOpenAIServer([Hold(reply("late"))], api_key="right-key") as server:
        env = {**_terminal_env(tmp_path, server.base_url), "APTIX_LLM_API_KEY": "right-key"}
        if failure == "401":
            env["APTIX_LLM_API_KEY"] = "wrong-key"
        elif failure == "unreachable":
            env["APTIX_LLM_BASE_URL"] = _closed_port_url()
        else:
            env["APTIX_LLM_TIMEOUT_SECONDS"] = "0.5"  # the held answer never comes
        child = spawn_chat(env)
        try:
            child.expect_exact("you>")
            child.sendline("hello")
            child.expect(r"error:(?:\x1b\[[0-9;]*m)* ([^\r\n]+)")
            line = child.match.group(1)
            child.expect_exact("you>")  # the chat goes on
            child.sendline("/quit")
            child.expect(pexpect.EOF)
        finally:
            child.close()
    assert what_to_check in line
    shown = all_shown(child)
    assert "Traceback" not in shown
    assert shown.count(line) == 1  # the log line went to chat.log, not to the screen
    assert line in (tmp_path / "chat.log").read_text()
    assert child.exitstatus == 0


def test_ctrl_o_toggles_tool_details_and_double_ctrl_c_at_an_empty_prompt_quits(
    tmp_path: Path,
) -> None:
    with ScriptedOpenAIServer() as server:
        child = spawn_chat(_terminal_env(tmp_path, server.base_url))
        try:
            child.expect_exact("you>")
            child.sendcontrol("o")  # Ctrl-O: tool calls in full from now on
            child.expect(r"tool details (?:\x1b\[[0-9;]*m)*on")
            child.send("half a line")
            child.sendintr()  # clears the typed line
            child.sendintr()  # at an empty prompt: a hint
            child.expect_exact("Press Ctrl-C again")
            child.expect_exact("you>")
            child.sendintr()
            child.expect(pexpect.EOF)
        finally:
            child.close()
    assert child.exitstatus == 0
    assert "Traceback" not in all_shown(child)


@pytest.mark.parametrize("key", ["ctrl-c", "ctrl-d"])
def test_ctrl_c_or_ctrl_d_at_an_approval_question_cancels_the_waiting_turn(
    tmp_path: Path, key: str
) -> None:
    script = [
        reply(None, call("request_user_approval", {"prompt": "Charge [red]59.97[/red]?"})),
        reply("Next."),
    ]
    with ScriptedOpenAIServer(script) as server:
        child = spawn_chat(_terminal_env(tmp_path, server.base_url))
        try:
            session_id = read_session_id(child)
            child.expect_exact("you>")
            child.sendline("Charge me")
            child.expect_exact("Charge [red]59.97[/red]?")
            child.expect_exact("approve? [y/n]")
            if key == "ctrl-c":
                child.sendintr()
            else:
                child.sendeof()
            child.expect_exact("Turn cancelled.")
            one_exchange(child, "And now?", "Next.")
        finally:
            child.close()
        server.assert_complete()
    assert child.exitstatus == 0
    assert "Traceback" not in all_shown(child)
    assert [t.status for t in stored_turns(tmp_path, session_id)] == ["cancelled", "completed"]


def test_up_at_an_approval_question_recalls_no_earlier_answer(tmp_path: Path) -> None:
    # The answer prompt keeps no history: Up then Enter approved with the last "y".
    script = [
        reply(None, call("request_user_approval", {"prompt": "Wipe staging?"}, id="a1")),
        reply("Staging wiped."),
        reply(None, call("request_user_approval", {"prompt": "Wipe prod?"}, id="a2")),
        reply("Prod kept."),
    ]
    with ScriptedOpenAIServer(script) as server:
        child = spawn_chat(_terminal_env(tmp_path, server.base_url))
        try:
            child.expect_exact("you>")
            child.sendline("wipe staging")
            child.expect_exact("approve? [y/n]")
            child.sendline("y")
            child.expect_exact("Staging wiped.")
            child.expect_exact("you>")
            child.sendline("wipe prod")
            child.expect_exact("Wipe prod?")
            child.expect_exact("approve? [y/n]")
            child.send(UP + "\r")  # nothing to recall: an empty answer, asked again
            answer_then_quit(child, "n", "Prod kept.")
        finally:
            child.close()
        server.assert_complete()
    answers = [server.requests[i]["messages"][-1] for i in (1, 3)]
    assert [(a["tool_call_id"], a["content"]) for a in answers] == [
        ("a1", '{"approved": true}'),
        ("a2", '{"approved": false}'),
    ]


def test_input_ending_at_an_approval_question_leaves_the_session_free(tmp_path: Path) -> None:
    script = [
        reply(None, call("request_user_approval", {"prompt": "Charge 59.97?"})),
        reply("Next."),
    ]
    with ScriptedOpenAIServer(script) as server:
        env = _terminal_env(tmp_path, server.base_url)

        def piped(*args: str, lines: str) -> subprocess.CompletedProcess[str]:
            command = [sys.executable, "-m", "aptix", "chat", *args]
            return subprocess.run(command, input=lines, env=env, capture_output=True, text=True)

        first = piped(lines="Charge me\n")
        second = piped("-c", lines="And now?\n")
        server.assert_complete()
    assert first.returncode == 0, first.stderr
    assert "approve? [y/n] \nTurn cancelled." in first.stdout
    assert second.returncode == 0, second.stderr
    assert "Next." in second.stdout
    assert "Traceback" not in first.stderr + second.stderr
    session_id = first.stdout.split("session ", 1)[1].split(".", 1)[0]
    assert [t.status for t in stored_turns(tmp_path, session_id)] == ["cancelled", "completed"]
