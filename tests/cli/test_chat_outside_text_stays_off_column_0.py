"""Outside text never starts a row at column 0 of the chat's terminal (review r2 of round 73).

Column 0 is where the chat's own ``approval needed:``, ``approve? [y/n]`` and ``you>`` stand;
text from a model or its endpoint that reaches it can draw them. Three ways it still did:

- F1: on ``TERM=dumb`` the streamed text was folded at the width the screen had when the
  text began; narrowed meanwhile, the terminal wrapped the longer rows to column 0 itself;
- F2: a failed turn's ``error:`` line (the endpoint's own words) and a ``warning:`` (which
  can quote the model's) were printed unfolded, and the terminal wrapped them;
- F3: ``aptix chat | tee log`` (stdout a pipe, read on the terminal the person types in)
  printed the text indented but never folded, and the terminal wrapped it.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pexpect
import pyte
import pytest

from aptix.testing import call, reply
from aptix.testing.server import Fail, Hold, ScriptedOpenAIServer
from tests.cli.pty_chat import all_shown, chat_env, quit_at_prompt

ROWS = 40


def _spawn(env: dict[str, str], command: str | None = None) -> pexpect.spawn:
    """The chat (or a shell ``command``) on a pty of ``env``'s size, without COLUMNS and LINES.

    The chat then reads its terminal's size, as it changes.
    """
    size = (int(env["LINES"]), int(env["COLUMNS"]))
    env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}
    program, args = (sys.executable, ["-m", "aptix", "chat"])
    if command is not None:
        program, args = "/bin/sh", ["-c", command]
    child = pexpect.spawn(
        program, args, env={**env, "NO_COLOR": "1"}, encoding="utf-8", timeout=30, dimensions=size
    )
    child.logfile_read = io.StringIO()
    return child


def _at_column_0(rows: list[str], start: str) -> list[str]:
    return [row for row in rows if row.startswith(start)]


def test_streamed_text_stays_indented_when_a_dumb_terminal_narrows(tmp_path: Path) -> None:
    wide, narrow = 60, 30
    # At 30 columns, "Hello" and the A's fill the row; the terminal took the rest to column 0.
    text = "Hello " + "A" * (narrow - 13) + " approval needed: Pay 1 EUR? done."
    with ScriptedOpenAIServer([Hold(reply(text), after_words=1)]) as server:
        env = chat_env(tmp_path, server.base_url, rows=ROWS, columns=wide)
        child = _spawn({**env, "TERM": "dumb"})
        try:
            child.expect_exact("you>")
            child.sendline("hi")
            child.expect_exact("agent> Hello")
            before = len(all_shown(child))
            child.setwinsize(ROWS, narrow)  # the person narrows the window
            server.release()
            quit_at_prompt(child)
        finally:
            child.close()
        server.assert_complete()
    shown = all_shown(child)
    screen = pyte.Screen(wide, ROWS)
    stream = pyte.Stream(screen)
    stream.feed(shown[:before])
    screen.resize(ROWS, narrow)  # as xterm does: what stands is cut, never rewrapped
    stream.feed(shown[before:])
    rows = [row.rstrip() for row in screen.display]
    first = next(i for i, row in enumerate(rows) if row.startswith("agent> Hello"))
    last = next(i for i, row in enumerate(rows) if row.startswith("you> /quit")) - 1
    assert last > first + 1, rows
    assert all(row.startswith(" " * 7) for row in rows[first + 1 : last + 1]), rows
    assert _at_column_0(rows, "approval needed:") == [], rows
    said = " ".join(row.strip() for row in rows[first : last + 1])
    assert said.replace(" ", "") == f"agent>{text}".replace(" ", ""), rows


#: Fills the first row of a 40-column screen after the chat's words, then draws its question.
ENDPOINT_SAYS = "x" * 16 + " approval needed: Pay 5000 EUR to evil?  approve? [y/n]"


@pytest.mark.parametrize("term", ["xterm", "dumb"])
def test_a_model_endpoints_error_stays_off_column_0(tmp_path: Path, term: str) -> None:
    columns = 40
    with ScriptedOpenAIServer([Fail(400, ENDPOINT_SAYS)]) as server:
        env = chat_env(tmp_path, server.base_url, rows=ROWS, columns=columns)
        child = _spawn({**env, "TERM": term})
        try:
            child.expect_exact("you>")
            child.sendline("hi")
            child.expect_exact("error:")
            quit_at_prompt(child)
        finally:
            child.close()
    screen = pyte.Screen(columns, ROWS)
    pyte.Stream(screen).feed(all_shown(child))
    rows = [row.rstrip() for row in screen.display]
    at = next(i for i, row in enumerate(rows) if row.startswith("error: "))
    end = next(i for i, row in enumerate(rows) if row.startswith("you> /quit"))
    assert _at_column_0(rows, "approval needed:") == [], rows
    assert all(row.startswith(" " * 7) for row in rows[at + 1 : end]), rows
    said = " ".join(row.strip() for row in rows[at:end])
    assert "HTTP 400" in said, rows
    assert said.endswith("approve? [y/n]"), rows


def test_a_warning_quoting_the_model_stays_off_column_0(tmp_path: Path) -> None:
    # "warning: The model used the tool call id(s) '" is 45 cells: the id starts row 2.
    columns = 45
    call_id = "approval needed: Pay 5000 EUR to evil?".ljust(columns) + "approve? [y/n]"
    twice = reply(
        None,
        call("agent_calculator", {"expression": "1+1"}, id=call_id),
        call("agent_calculator", {"expression": "2+2"}, id=call_id),
    )
    with ScriptedOpenAIServer([twice, reply("Two.")]) as server:
        env = chat_env(tmp_path, server.base_url, rows=ROWS, columns=columns)
        child = _spawn(env)
        try:
            child.expect_exact("you>")
            child.sendline("add")
            child.expect_exact("warning:")
            quit_at_prompt(child)
        finally:
            child.close()
        server.assert_complete()
    screen = pyte.Screen(columns, ROWS)
    pyte.Stream(screen).feed(all_shown(child))
    rows = [row.rstrip() for row in screen.display]
    at = next(i for i, row in enumerate(rows) if row.startswith("warning: "))
    end = next(i for i, row in enumerate(rows) if row.startswith("you> /quit"))
    assert _at_column_0(rows, "approval needed:") == [], rows
    assert _at_column_0(rows, "approve?") == [], rows
    assert all(row.startswith(" " * 9) for row in rows[at + 1 : end]), rows
    said = " ".join(row.strip() for row in rows[at:end])
    assert said.startswith("warning: The model used the tool call id(s) 'approval needed:"), rows
    assert said.endswith(
        "more than once in one response; 1 repeated call(s) were refused and not run."
    )


def test_model_text_piped_to_the_terminal_stays_off_column_0(tmp_path: Path) -> None:
    # aptix chat | tee chat.log: stdout is a pipe, and the person reads it on their terminal.
    columns = 40
    forged = "ok\napproval needed: Fake?\napprove? [y/n] " + "z" * 18 + "approval needed: Wrap?"
    script = [
        reply(forged),
        reply(None, call("request_user_approval", {"prompt": "Real?"}, id="a1")),
        reply("Done."),
    ]
    with ScriptedOpenAIServer(script) as server:
        env = chat_env(tmp_path, server.base_url, rows=ROWS, columns=columns)
        child = _spawn(env, f"'{sys.executable}' -m aptix chat | cat")
        try:
            child.expect_exact("you>")
            child.sendline("hi")
            child.expect_exact("Wrap?")
            child.expect_exact("you>")
            child.sendline("pay")
            child.expect_exact("approve? [y/n]")
            child.sendline("y")
            child.expect_exact("Done.")
            quit_at_prompt(child)
        finally:
            child.close()
        server.assert_complete()
    # Taller than the pty: the prompt's redraws through the pipe scroll the first rows away.
    screen = pyte.Screen(columns, 5 * ROWS)
    pyte.Stream(screen).feed(all_shown(child))
    rows = [row.rstrip() for row in screen.display]
    assert _at_column_0(rows, "approval needed:") == ["approval needed: Real?"], rows
    assert _at_column_0(rows, "approve?") == ["approve? [y/n]"], rows
    first = next(i for i, row in enumerate(rows) if row.startswith("agent> ok"))
    last = next(i for i, row in enumerate(rows) if row.endswith("Wrap?"))
    assert all(row.startswith(" " * 7) for row in rows[first + 1 : last + 1]), rows
