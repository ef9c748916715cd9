"""Ctrl-C during two calls of one tool: each is named with its arguments (round 73, r2 F4).

The chat named each call the cancel stopped by its tool alone, ``⚙ send_report → unknown: …
check whether it took effect``, twice alike for ``send_report(to="a")`` and
``send_report(to="b")``: the person could not tell which report to check. Calls of a tool the
turn called more than once now show their arguments (on one row), live and when the session
is continued.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pyte
import pytest

from aptix.cli import output
from aptix.cli.chat_commands import show_call
from aptix.testing import call, reply
from aptix.testing.server import ScriptedOpenAIServer
from tests.cli.pty_chat import (
    all_shown,
    chat_env,
    quit_at_prompt,
    read_session_id,
    spawn_chat,
    stored_turns,
)

TOOLS = '''
import asyncio
import pathlib

import aptix


@aptix.tool(usage="Sends the report; the test presses Ctrl-C meanwhile.")
async def send_report(to: str) -> str:
    """Says it started, then takes its time.

    Args:
        to: whom the report goes to.
    """
    pathlib.Path(__file__).with_name("started-" + to).touch()
    await asyncio.sleep(120)
    return "sent"
'''
ROWS, COLUMNS = 60, 60
#: How each stopped call begins, with the arguments that tell it apart.
NAMED = [
    '  ⚙ send_report({"to": "a"}) → unknown: The turn was',
    '  ⚙ send_report({"to": "b"}) → unknown: The turn was',
]


def _rows(shown: str) -> list[str]:
    screen = pyte.Screen(COLUMNS, ROWS)
    pyte.Stream(screen).feed(shown)
    return [row.rstrip() for row in screen.display]


def _calls_named(rows: list[str]) -> list[str]:
    return [row for row in rows if re.match(r"  ⚙ send_report\b", row)]


def test_two_stopped_calls_of_one_tool_are_told_apart(tmp_path: Path) -> None:
    tools = tmp_path / "report_tools.py"
    tools.write_text(TOOLS)
    both = reply(
        None,
        call("send_report", {"to": "a"}, id="t1"),
        call("send_report", {"to": "b"}, id="t2"),
    )
    with ScriptedOpenAIServer([both]) as server:
        env = {
            **chat_env(tmp_path, server.base_url, rows=ROWS, columns=COLUMNS),
            "APTIX_TOOL_MODULES": str(tools),
            "NO_COLOR": "1",
        }
        child = spawn_chat(env)
        try:
            session_id = read_session_id(child)
            child.expect_exact("you>")
            child.sendline("Send both")
            deadline = time.monotonic() + 60
            while not all((tmp_path / f"started-{to}").exists() for to in "ab"):
                assert time.monotonic() < deadline, "the tools never started"
                time.sleep(0.05)
            child.sendintr()
            child.expect_exact("Turn cancelled.")
            quit_at_prompt(child)
        finally:
            child.close()
        live = _rows(all_shown(child))
        [turn] = stored_turns(tmp_path, session_id)
        assert [(c["argumentsJson"], c["outcome"]) for c in turn.tool_calls] == [
            ('{"to": "a"}', "unknown"),
            ('{"to": "b"}', "unknown"),
        ]
        # Continued, the chat lists the cancelled turn's calls the same way.
        again = spawn_chat(env, "--session-id", session_id)
        try:
            quit_at_prompt(again)
        finally:
            again.close()
    assert _calls_named(live) == NAMED, live
    assert _calls_named(_rows(all_shown(again))) == NAMED


def test_a_calls_arguments_take_one_row_at_most(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output.console, "_width", 40)
    stopped = {
        "name": "send_report",
        "argumentsJson": '{"to": "' + "x" * 500 + '"}',
        "outcome": "unknown",
        "errorMessage": "Check it.",
    }
    with output.console.capture() as captured:
        show_call(stopped, arguments=True)
    rows = captured.get().splitlines()
    assert all(row.startswith("    ") for row in rows[1:]), rows
    # 40 columns, 4 of indent, 2 for the parentheses: 34 cells of arguments, "…" the last.
    cut = '{"to": "' + "x" * 25 + "…"
    assert " ".join(row.strip() for row in rows) == f"⚙ send_report({cut}) → unknown: Check it."
