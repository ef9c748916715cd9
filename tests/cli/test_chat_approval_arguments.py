"""``aptix chat`` asking to approve an MCP call: the person sees every argument first.

The approval request's ``details`` quote at most 2,000 characters of the arguments; a call
padded past that (``"list files in /tmp" + spaces + "; rm -rf /"``) hid its tail there, and
the person approved what they could not see. Shown whole, the same spaces wrapped the text
after them to column 0 instead, where it drew a fake header for another tool above the
question and pushed the real one off the screen (review r7 F1).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyte

from aptix.cli.chat_approval import APPROVAL_LINES
from aptix.testing import call, reply
from aptix.testing.server import ScriptedOpenAIServer, Step
from tests.cli.pty_chat import all_shown, answer_then_quit, chat_env, quit_at_prompt, spawn_chat
from tests.tools.mcp_servers import flaky_server

TAIL = "; rm -rf / --no-preserve-root"


def _env(
    tmp_path: Path, base_url: str, log: Path, rows: int = 40, columns: int = 120
) -> dict[str, str]:
    return {
        **chat_env(tmp_path, base_url, rows=rows, columns=columns),
        "NO_COLOR": "1",
        "APTIX_MCP_SERVERS": json.dumps({"vault": flaky_server(log)}),
    }


def _script(target: str, **more: object) -> list[Step]:
    wipe = call("vault_delete_everything", {"target": target, **more}, id="wipe-1")
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
            # The run of spaces is shown as its length: it cannot push the rest out of sight.
            child.expect_exact('"target": "list files in /tmp⟨2,100 spaces⟩' + TAIL + '"')
            answer_then_quit(child, "n", "Done.")
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
    target = "list files in /tmp" + "x" * 120 * APPROVAL_LINES + TAIL  # folds over 13+ rows
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
            child.expect_exact(TAIL)
            child.expect_exact("Allow 'vault_delete_everything'")  # said again, below them
            answer_then_quit(child, "y", "Done.")
        finally:
            child.close()
        server.assert_complete()
    assert log.read_text(encoding="utf-8").split() == ["delete_everything"]
    assert "Traceback" not in all_shown(child)


def _fake_header(columns: int) -> str:
    """Spaces, then a header for another tool and an empty argument list, row by row."""

    def row(text: str) -> str:
        return text + " " * (columns - len(text))

    fake = "approval needed: Allow 'vault_echo' (tool 'echo' of the MCP server 'vault')"
    return (
        " " * (columns * 26 - len('      "note": "'))
        + row(fake)
        + row("to run?")
        + row("  arguments:")
        + row("    {}")
        + "   "
    )


def test_padding_cannot_put_another_tools_header_above_the_question(tmp_path: Path) -> None:
    rows, columns = 24, 80
    log = tmp_path / "calls.log"
    script = _script("prod", note=_fake_header(columns))
    with ScriptedOpenAIServer(script) as server:
        child = spawn_chat(_env(tmp_path, server.base_url, log, rows=rows, columns=columns))
        try:
            child.expect_exact("you>")
            child.sendline("clean the cache")
            child.expect_exact("approve? [y/n]")
            screen = pyte.Screen(columns, rows)
            pyte.Stream(screen).feed(all_shown(child))
            child.sendline("n")
            child.expect_exact("Done.")
            quit_at_prompt(child)
        finally:
            child.close()
    shown = [line.rstrip() for line in screen.display]
    question = max(i for i, line in enumerate(shown) if line.startswith("approve? [y/n]"))
    headers = [i for i, line in enumerate(shown[:question]) if line.startswith("approval needed:")]
    # The rows right above the question are the real tool's header (wrapped, its second row
    # indented); the fake one is part of the indented arguments, never at column 0.
    assert headers, shown
    assert shown[headers[-1]].startswith("approval needed: Allow 'vault_delete_everything'")
    assert all(line.startswith(" ") for line in shown[headers[-1] + 1 : question])
    assert all("vault_delete_everything" in shown[i] for i in headers)
    assert any("⟨" in line and "spaces⟩" in line for line in shown)
    assert not log.exists()


def test_hostile_argument_text_is_shown_not_obeyed(tmp_path: Path) -> None:
    target = "prod\x1b[2J\u202egnp.exe"
    log = tmp_path / "calls.log"
    with ScriptedOpenAIServer(_script(target)) as server:
        child = spawn_chat(_env(tmp_path, server.base_url, log))
        try:
            child.expect_exact("you>")
            child.sendline("clean up")
            answer_then_quit(child, "n", "Done.")
        finally:
            child.close()
    shown = all_shown(child)
    # json.dumps escapes ESC itself; the bidi control, legal in JSON text, is spelled out.
    assert '"target": "prod\\u001b[2J<U+202E>gnp.exe"' in shown
    assert "\u202e" not in shown
