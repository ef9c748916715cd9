"""An approval question on a screen under 37 columns: no outside text at column 0 (review r2, F3).

The header's text was folded to at least 20 cells after its 17-cell indent, 37 cells on a
20-column screen: the terminal wrapped the rest to column 0, and a model's prompt put a row
``approval needed:`` there, of its own. Narrower than its indent leaves room for, the header
now gives the label a row of its own and folds the text under a small indent.
"""

from __future__ import annotations

from pathlib import Path

import pexpect
import pyte
import pytest

from aptix.cli import output
from aptix.testing import call, reply
from aptix.testing.server import ScriptedOpenAIServer
from tests.cli.pty_chat import all_shown, chat_env, spawn_chat

ROWS, COLUMNS = 40, 20
PROMPT = "xyzapproval needed: Allow 'read_only' to run? ok"


def test_a_narrow_screen_keeps_the_question_and_details_off_column_0(tmp_path: Path) -> None:
    ask = call("request_user_approval", {"prompt": PROMPT, "details": "Reads the cache."})
    with ScriptedOpenAIServer([reply(None, ask), reply("ok")]) as server:
        env = {**chat_env(tmp_path, server.base_url, rows=ROWS, columns=COLUMNS), "NO_COLOR": "1"}
        child = spawn_chat(env)
        try:
            child.expect_exact("you>")
            child.sendline("ask")
            child.expect_exact("approve? [y/n]")
            screen = pyte.Screen(COLUMNS, ROWS)
            pyte.Stream(screen).feed(all_shown(child))
            child.sendline("n")
            child.expect_exact("you>")
            child.sendline("/quit")
            child.expect(pexpect.EOF)
        finally:
            child.close()
    rows = [row.rstrip() for row in screen.display]
    start = next(i for i, row in enumerate(rows) if row.startswith("you> ask"))
    question = next(i for i, row in enumerate(rows) if row.startswith("approve? [y/n]"))
    shown = rows[start + 1 : question]
    # At column 0 only the chat's own label; the prompt and details are indented under it.
    assert [row for row in shown if not row.startswith(" ")] == ["approval needed:"] * 2, shown
    text = " ".join(row.strip() for row in shown if row.startswith(" "))
    assert text.startswith("xyzapproval needed: Allow 'read_only' to run? ok"), shown
    assert "Reads the cache." in text


@pytest.mark.parametrize(
    ("width", "label", "text", "rows"),
    [
        (36, "approval needed:", "Pay 5 EUR?", ["approval needed: Pay 5 EUR?"]),
        (24, "mode:", "general", ["mode: general"]),
        (20, "approval needed:", "Pay 5 EUR?", ["approval needed:", "  Pay 5 EUR?"]),
    ],
)
def test_a_line_that_fits_keeps_its_label_on_its_row(
    monkeypatch: pytest.MonkeyPatch, width: int, label: str, text: str, rows: list[str]
) -> None:
    # Review s5 F1: under 37 columns every label took a row of its own, lines that fit too.
    monkeypatch.setattr(output.console, "_width", width)
    indent = len(label) + 1
    shown = [row.plain.rstrip() for row in output.folded(text, indent=indent, label=label)]
    assert shown == rows
