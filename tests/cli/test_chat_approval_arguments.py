"""``aptix chat`` asking to approve an MCP call: the person sees every argument first.

The approval request's ``details`` quote at most 2,000 characters of the arguments; a call
padded past that (``"list files in /tmp" + spaces + "; rm -rf /"``) hid its tail there, and
the person approved what they could not see.
"""

from __future__ import annotations

import json
from pathlib import Path

import pexpect

from aptix.cli.chat import APPROVAL_ARGUMENTS_CHARS
from aptix.testing import call, reply
from aptix.testing.server import ScriptedOpenAIServer, Step
from tests.cli.pty_chat import all_shown, chat_env, spawn_chat
from tests.tools.mcp_servers import flaky_server

TAIL = "; rm -rf / --no-preserve-root"


def _env(tmp_path: Path, base_url: str, log: Path) -> dict[str, str]:
    return {
        **chat_env(tmp_path, base_url, rows=40, columns=120),
        "NO_COLOR": "1",
        "APTIX_MCP_SERVERS": json.dumps({"vault": flaky_server(log)}),
    }


def _script(target: str) -> list[Step]:
    wipe = call("vault_delete_everything", {"target": target}, id="wipe-1")
    return [reply(None, wipe), reply("Done.")]


def test_the_tail_of_a_long_argument_is_shown_before_the_approval_question(
    tmp_path: Path,
) -> None:
    target = "list files in /tmp" + " " * 2100 + TAIL
    log = tmp_path / "calls.log"
    with ScriptedOpenAIServer(_script(target)) as server:
        child = spawn_chat(_env(tmp_path, server.base_url, log))
        try:
            child.expect_exact("you>")
            child.sendline("clean up")
            child.expect_exact("approval needed:")
            child.expect_exact(f'"target": "{target}"')
            child.expect_exact("approve? [y/n]")
            child.sendline("n")
            child.expect_exact("Done.")
            child.expect_exact("you>")
            child.sendline("/quit")
            child.expect(pexpect.EOF)
        finally:
            child.close()
        server.assert_complete()
        denied = server.requests[1]["messages"][-1]
    assert "did not approve" in denied["content"]
    assert not log.exists()  # denied: the server never ran it
    shown = all_shown(child)
    assert shown.index(TAIL) < shown.index("approve?")
    assert "Traceback" not in shown


def test_arguments_longer_than_a_screenful_are_shown_whole_on_s(tmp_path: Path) -> None:
    target = "list files in /tmp" + " " * APPROVAL_ARGUMENTS_CHARS + TAIL
    log = tmp_path / "calls.log"
    with ScriptedOpenAIServer(_script(target)) as server:
        child = spawn_chat(_env(tmp_path, server.base_url, log))
        try:
            child.expect_exact("you>")
            child.sendline("clean up")
            child.expect_exact("answer s to show them all.")
            child.expect_exact("approve? [y/n/s]")
            assert TAIL not in all_shown(child)
            child.sendline("s")
            child.expect_exact("arguments, in full:")
            child.expect_exact(f'"target": "{target}"')
            child.expect_exact("approve? [y/n]")
            child.sendline("y")
            child.expect_exact("Done.")
            child.expect_exact("you>")
            child.sendline("/quit")
            child.expect(pexpect.EOF)
        finally:
            child.close()
        server.assert_complete()
    assert log.read_text(encoding="utf-8").split() == ["delete_everything"]
    assert "Traceback" not in all_shown(child)


def test_hostile_argument_text_is_shown_not_obeyed(tmp_path: Path) -> None:
    target = "prod\x1b[2J\u202egnp.exe"
    log = tmp_path / "calls.log"
    with ScriptedOpenAIServer(_script(target)) as server:
        child = spawn_chat(_env(tmp_path, server.base_url, log))
        try:
            child.expect_exact("you>")
            child.sendline("clean up")
            child.expect_exact("approve? [y/n]")
            child.sendline("n")
            child.expect_exact("Done.")
            child.expect_exact("you>")
            child.sendline("/quit")
            child.expect(pexpect.EOF)
        finally:
            child.close()
    shown = all_shown(child)
    # json.dumps escapes ESC itself; the bidi control, legal in JSON text, is spelled out.
    assert '"target": "prod\\u001b[2J<U+202E>gnp.exe"' in shown
    assert "\u202e" not in shown
