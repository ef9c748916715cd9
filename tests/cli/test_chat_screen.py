"""What ``aptix chat`` leaves on a real terminal's screen (a pty read back through pyte).

pyte is a VT100 emulator: feeding it everything the chat wrote gives the screen a person
would see, so a redraw that overwrote earlier lines, a cleared screen or a changed window
title shows up as what it is, not as bytes in a log.
"""

from __future__ import annotations

from pathlib import Path

import pexpect
import pyte

from aptix.testing import call, reply
from aptix.testing.server import ScriptedOpenAIServer
from tests.cli.pty_chat import all_shown, chat_env, one_exchange, read_session_id, spawn_chat

ROWS, COLUMNS = 60, 120
ESC = "\x1b"
HOSTILE = (
    f"Before{ESC}[2J{ESC}[H{ESC}]0;pwned{ESC}\\{ESC}]0;pwned\x07"
    f"{ESC}]8;;https://evil.example/{ESC}\\click{ESC}]8;;{ESC}\\"
    f"{ESC}P+q544e{ESC}\\\x9b31mC1\x9d2;pwned\x9c"
    "[bold red]markup[/] \u202eevil\u202c \u2066iso\u2069 back\bspace\rreturn After"
)
URL = "https://example.com/" + "a1b2c3d4e5" * 28  # 300 characters, no place to break
IDENT = "build-" + "0123456789abcdef" * 12  # a table cell that cannot fit: it folds too
MARKDOWN = f"""# Release notes

The **build** passed. See {URL} for details.

| field | value |
|---|---|
| id | {IDENT} |

```python
def greet(name: str) -> str:
    return f"hello {{name}}"
```

- first point
- second point
"""


def _env(tmp_path: Path, base_url: str) -> dict[str, str]:
    return chat_env(tmp_path, base_url, rows=ROWS, columns=COLUMNS)


def _screen(output: str) -> pyte.Screen:
    screen = pyte.Screen(COLUMNS, ROWS)
    pyte.Stream(screen).feed(output)
    return screen


def _rows(screen: pyte.Screen) -> list[str]:
    return [row.rstrip() for row in screen.display]


def test_hostile_model_text_tool_names_and_results_are_shown_as_inert_text(
    tmp_path: Path,
) -> None:
    script = [
        reply(
            None,
            call("agent_calculator", {"expression": f"1+{ESC}[2J"}),
            call(f"evil{ESC}]0;pwned\x07_tool", {}),
        ),
        reply(HOSTILE),
    ]
    with ScriptedOpenAIServer(script) as server:
        child = spawn_chat(_env(tmp_path, server.base_url))
        try:
            one_exchange(child, "Say something nasty", "After")
        finally:
            child.close()
        server.assert_complete()
    output = all_shown(child)
    for attack in (f"{ESC}[2J", f"{ESC}[H{ESC}]", f"{ESC}]0;", f"{ESC}]8;", f"{ESC}P", "\x9b"):
        assert attack not in output, attack
    assert not any(c in output for c in "\u202e\u2066\u2069\x07\b\x9d")
    screen = _screen(output)
    assert screen.title == ""  # pyte keeps what an OSC title change would have set
    shown = "\n".join(_rows(screen))
    assert "Aptix chat — session" in shown  # nothing cleared the screen
    assert "Before␛[2J␛[H␛]0;pwned␛\\␛]0;pwned␇" in shown
    assert "[bold red]markup[/] <U+202E>evil<U+202C> <U+2066>iso<U+2069>" in shown
    assert "back␈space␍return After" in shown
    assert "1+␛[2J" in shown  # the calculator's argument, in the tool line
    assert "evil␛]0;pwned␇_tool" in shown  # an unknown tool's name


def test_a_markdown_reply_in_a_fresh_process_renders_cleanly_ten_times_out_of_ten(
    tmp_path: Path,
) -> None:
    runs, at_once = 10, 5  # five processes at a time: the machine's cores are all used
    screens: list[list[str]] = []
    with ScriptedOpenAIServer([reply(MARKDOWN) for _ in range(runs)]) as server:
        for batch in range(runs // at_once):
            children = [
                spawn_chat(_env(tmp_path / f"{batch}-{n}", server.base_url)) for n in range(at_once)
            ]
            try:
                for child in children:
                    child.expect_exact("you>")
                    child.sendline("What changed?")
                for child in children:
                    child.expect_exact("second point")
                    child.expect_exact("you>")
                    child.sendline("/quit")
                for child in children:
                    child.expect(pexpect.EOF)
            finally:
                for child in children:
                    child.close()
            assert [c.exitstatus for c in children] == [0] * at_once
            screens.extend(_rows(_screen(all_shown(c))) for c in children)
        server.assert_complete()
    assert len(screens) == runs
    expected = [
        "Aptix chat — session",
        "you> What changed?",
        "Release notes",
        "The build passed. See",
        "def greet(name: str) -> str:",
        'return f"hello {name}"',
        "• first point",
        "• second point",
        "you> /quit",
    ]
    for rows in screens:
        text = "\n".join(rows)
        positions = [text.find(line) for line in expected]
        assert -1 not in positions, text
        assert positions == sorted(positions), text
        assert text.count("Release notes") == 1, text  # no leftover of the live region
        assert "…" not in text
        # The URL folds over several rows; read back without the indentation it is whole.
        assert URL in "".join(row.strip() for row in rows)
        assert IDENT in "".join(row.strip() for row in rows)  # a table cell folds as well


def test_a_long_answer_is_drawn_with_output_linear_in_its_length(tmp_path: Path) -> None:
    # 2,000 words at once: a redraw of the whole answer for each one wrote 8 MB and took half
    # a minute. Redraws now wait for the ticker and draw a screenful, so what the terminal
    # gets is the final answer and a few screenfuls, whatever the machine's speed.
    answer = "".join(f"word{i}" + ("\n" if i % 12 == 11 else " ") for i in range(2_000))
    with ScriptedOpenAIServer([reply(answer)]) as server:
        child = spawn_chat(chat_env(tmp_path, server.base_url, rows=12, columns=100))
        try:
            child.expect_exact("you>")
            before = len(all_shown(child))
            child.sendline("Count to two thousand")
            child.expect_exact("word1999", timeout=120)
            child.expect_exact("you>", timeout=120)
            written = len(all_shown(child)) - before
            child.sendline("/quit")
            child.expect(pexpect.EOF)
        finally:
            child.close()
        server.assert_complete()
    assert written < 6 * len(answer), (written, len(answer))
    screen = pyte.Screen(100, 12)
    pyte.Stream(screen).feed(all_shown(child))
    rows = [row.strip() for row in screen.display if row.strip()]
    # The final Markdown pass ends above the prompt, whole (its soft line breaks joined).
    assert rows[-2:] == ["word1996 word1997 word1998 word1999", "you> /quit"], rows


def test_alt_enter_adds_a_line_unknown_commands_are_named_and_continue_shows_the_last_turns(
    tmp_path: Path,
) -> None:
    script = [reply("Two lines received."), reply("Welcome back.")]
    with ScriptedOpenAIServer(script) as server:
        env = _env(tmp_path, server.base_url)
        first = spawn_chat(env)
        try:
            session_id = read_session_id(first)
            first.expect_exact("you>")
            first.send("/bogus\r")
            first.expect_exact("Unknown command /bogus.")
            first.expect_exact("you>")
            first.send(f"first line{ESC}\rsecond line\r")  # Alt-Enter arrives as Esc, Enter
            first.expect_exact("Two lines received.")
            first.expect_exact("you>")
            first.sendline("/quit")
            first.expect(pexpect.EOF)
        finally:
            first.close()
        second = spawn_chat(env, "--continue")
        try:
            second.expect_exact("Last 1 turn(s) of this session:")
            second.expect_exact("Two lines received.")
            resumed = read_session_id(second)
            second.expect_exact("you>")
            second.sendline("Still there?")
            second.expect_exact("Welcome back.")
            second.expect_exact("you>")
            second.sendline("/quit")
            second.expect(pexpect.EOF)
        finally:
            second.close()
        server.assert_complete()
    first_messages = server.requests[0]["messages"]
    assert [m["content"] for m in first_messages if m["role"] == "user"] == [
        "first line\nsecond line"
    ]
    assert resumed == session_id
    assert "first line" in all_shown(second)


ENTITY_REPLY = """# Notes &#x202E;h

Plain &#x202E;p &rlm;m and *&#x2067;em*; in Java use List<String> and Vec<u8> in Rust.

> quote &#x202D;q

<div>
Hidden paragraph
</div>

See ![the chart](http://evil.example/x.png) <!-- c --> End."""


def test_the_final_markdown_shows_entities_as_code_points_and_html_as_written(
    tmp_path: Path,
) -> None:
    with ScriptedOpenAIServer([reply(ENTITY_REPLY)]) as server:
        child = spawn_chat(_env(tmp_path, server.base_url))
        try:
            one_exchange(child, "Write some Markdown", "End.")
        finally:
            child.close()
        server.assert_complete()
    output = all_shown(child)
    assert not any(c in output for c in "\u200f\u202d\u202e\u2067"), ascii(output)
    shown = "\n".join(row.strip() for row in _rows(_screen(output)))  # without the indent
    for line in (
        "Notes <U+202E>h",
        "Plain <U+202E>p <U+200F>m and <U+2067>em; in Java use List<String> and Vec<u8> in Rust.",
        "quote <U+202D>q",
        "<div>\nHidden paragraph\n</div>",
        "See 🌆 the chart (http://evil.example/x.png) <!-- c --> End.",
    ):
        assert line in shown, shown
