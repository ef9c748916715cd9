"""Ctrl-C while a tool runs: the chat names the call it stopped, as the record does (review r2, F5).

The chat said only "Turn cancelled.", while the record marked the call ``unknown``: it was
stopped mid-run and may have partly taken effect. A person has to know that to check before
retrying it. A sync tool, whose thread no cancel stops, is ``abandoned``: it may still finish.
"""

from __future__ import annotations

import time
from pathlib import Path

import pexpect
import pyte
import pytest

from aptix.testing import call, reply
from aptix.testing.server import ScriptedOpenAIServer
from tests.cli.pty_chat import all_shown, chat_env, read_session_id, spawn_chat, stored_turns

TOOLS = '''
import asyncio
import pathlib
import threading

import aptix


@aptix.tool(usage="Sends the report; the test presses Ctrl-C meanwhile.")
async def send_report() -> str:
    """Says it started, then takes its time."""
    pathlib.Path(__file__).with_name("started").touch()
    await asyncio.sleep(120)
    return "sent"


@aptix.tool(usage="Copies the files, in a thread; the test presses Ctrl-C meanwhile.")
def copy_files() -> str:
    """Says it started, then takes its time (a few seconds, so the chat can exit after)."""
    pathlib.Path(__file__).with_name("started").touch()
    threading.Event().wait(3)
    return "copied"
'''
ROWS, COLUMNS = 40, 120
#: What the chat says of each call, by its tool: the outcome and the record's own words.
SAID = {
    "send_report": (
        "  ⚙ send_report → unknown: The turn was cancelled while this call ran; it was stopped "
        "and may have partly taken effect, so its outcome is unknown. It was not run again: "
        "check whether it took effect before retrying it."
    ),
    "copy_files": (
        "  ⚙ copy_files → abandoned: The turn was cancelled while this call ran in a thread "
        "that cannot be stopped: it may still complete. Check whether it took effect before "
        "retrying it."
    ),
}


def _screen(shown: str) -> str:
    """What a person reads, rows joined (the line is folded at the screen's width)."""
    screen = pyte.Screen(COLUMNS, ROWS)
    pyte.Stream(screen).feed(shown)
    return "\n".join(row.rstrip() for row in screen.display if row.strip())


@pytest.mark.parametrize("tool", SAID)
def test_ctrl_c_while_a_tool_runs_names_the_call_and_its_outcome(tmp_path: Path, tool: str) -> None:
    tools = tmp_path / "report_tools.py"
    tools.write_text(TOOLS)
    started = tmp_path / "started"
    with ScriptedOpenAIServer([reply(None, call(tool, {}, id="t1"))]) as server:
        env = {
            **chat_env(tmp_path, server.base_url, rows=ROWS, columns=COLUMNS),
            "APTIX_TOOL_MODULES": str(tools),
            "NO_COLOR": "1",
        }
        child = spawn_chat(env)
        child.timeout = 120
        try:
            session_id = read_session_id(child)
            child.expect_exact("you>")
            child.sendline("Do it")
            deadline = time.monotonic() + 60
            while not started.exists():
                assert time.monotonic() < deadline, "the tool never started"
                time.sleep(0.05)
            child.sendintr()
            child.expect_exact("Turn cancelled.")
            child.expect_exact("you>")
            child.sendeof()
            child.expect(pexpect.EOF)
        finally:
            child.close()
        [turn] = stored_turns(tmp_path, session_id)
    [stopped] = turn.tool_calls
    outcome = SAID[tool].split(" → ")[1].split(":")[0]
    assert (turn.status, stopped["outcome"]) == ("cancelled", outcome)
    assert SAID[tool].endswith(stopped["errorMessage"])
    rows = _screen(all_shown(child)).split("\n")
    at = next(i for i, row in enumerate(rows) if row.startswith(f"  ⚙ {tool} → "))
    said = rows[at]
    for row in rows[at + 1 :]:
        if not row.startswith("    "):  # the line's folded rows are indented under it
            break
        said += " " + row.strip()
    assert said == SAID[tool]
    assert "Turn cancelled. The chat goes on; Ctrl-C again quits." in rows[at:]
