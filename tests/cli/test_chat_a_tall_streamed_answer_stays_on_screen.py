"""A streamed answer taller than half the screen stays on it once whole (review r2, F4).

When the answer was whole, the chat erased the streamed rows and printed the Markdown answer,
and Rich then drew the streamed copy again below it (the live region's renderable, swapped
for the spinner without a redraw), so a 17-row answer on a 30-row screen pushed its first
rows, ``agent>`` among them, into the scrollback, and left blank rows under the prompt.

The scripted model streams ten words, holds until the live region has drawn them, then sends
the rest: the region holds streamed text when the answer is printed.
"""

from __future__ import annotations

from pathlib import Path

import pexpect
import pyte

from aptix.testing import reply
from aptix.testing.server import Hold, ScriptedOpenAIServer
from tests.cli.pty_chat import all_shown, chat_env, spawn_chat

ROWS, COLUMNS = 30, 100
WORDS = " ".join(f"w{i:03d}" for i in range(300))  # 17 rows under the label


def test_a_tall_streamed_answer_is_not_pushed_into_the_scrollback(tmp_path: Path) -> None:
    with ScriptedOpenAIServer([Hold(reply(WORDS + " FINAL"), after_words=10)]) as server:
        env = {**chat_env(tmp_path, server.base_url, rows=ROWS, columns=COLUMNS), "NO_COLOR": "1"}
        child = spawn_chat(env)
        try:
            child.expect_exact("you>")
            child.sendline("go")
            child.expect_exact("w009")  # drawn by the live region; the model holds the rest
            server.release()
            child.expect_exact("FINAL")
            child.expect_exact("you>")
            screen = pyte.HistoryScreen(COLUMNS, ROWS, history=1000)
            pyte.Stream(screen).feed(all_shown(child))
            child.sendline("/quit")
            child.expect(pexpect.EOF)
        finally:
            child.close()
    rows = [row.rstrip() for row in screen.display]
    assert not screen.history.top, "rows were pushed into the scrollback"
    [first] = [i for i, row in enumerate(rows) if row.startswith("agent> w000 ")]
    [last] = [i for i, row in enumerate(rows) if row.endswith("w299 FINAL")]
    assert last - first == 16
    assert rows[last + 1] == "you>"
    assert sum("w150" in row for row in rows) == 1  # no copy left of the streamed text
