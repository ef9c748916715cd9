"""``aptix chat`` on a terminal whose encoding is Latin-1 or ASCII (review r2, F1).

Python writes stdout in the locale's encoding, so ``—`` in the chat's first line ended it
with a UnicodeEncodeError traceback before its first prompt. The chat must work there:
what the encoding has is written as it is (``é`` on Latin-1), the chat's own symbols in ASCII
(``->``, ``*``), and what outside text holds that the encoding lacks as its code point
(``<U+4E2D>``), still inert (an escape shows as ``^[``, never sent raw).
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pexpect
import pyte
import pytest

from aptix.testing import call, reply
from aptix.testing.server import ScriptedOpenAIServer
from tests.cli.pty_chat import answer_then_quit, chat_env

ROWS, COLUMNS = 40, 100
ANSWER = (
    "Caf\u00e9 \u2014 r\u00e9sum\u00e9 \u2192 \u4e2d\u6587"
    ", \x1b[2Jcleared? \u2018no\u2019 \U0001f600"
)
PROMPT = "Charge \u4e2d\u6587 \u2014 59.97?"
#: The locale's encoding: ASCII (the POSIX locale outside Python's UTF-8 mode), or Latin-1.
ENCODINGS = {
    "ascii": {"LC_ALL": "POSIX", "PYTHONUTF8": "0"},
    "latin-1": {"LC_ALL": "POSIX", "PYTHONUTF8": "0", "PYTHONIOENCODING": "latin-1"},
}


def _script() -> list[object]:
    return [
        reply(None, call("agent_calculator", {"expression": "19.99*3"}, id="c1")),
        reply(ANSWER),
        reply(None, call("request_user_approval", {"prompt": PROMPT, "details": "d"}, id="a1")),
        reply("Charged \u2713"),
    ]


def _env(tmp_path: Path, base_url: str, encoding: str) -> dict[str, str]:
    env = chat_env(tmp_path, base_url, rows=ROWS, columns=COLUMNS)
    for name in ("LANG", "LC_CTYPE", "PYTHONIOENCODING"):
        env.pop(name, None)
    return {**env, **ENCODINGS[encoding], "NO_COLOR": "1"}


def _rows(shown: str) -> list[str]:
    screen = pyte.Screen(COLUMNS, ROWS)
    pyte.Stream(screen).feed(shown)
    return [row.rstrip() for row in screen.display]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_chat_writes_what_a_latin1_or_ascii_terminal_can_show(
    tmp_path: Path, encoding: str
) -> None:
    with ScriptedOpenAIServer(_script()) as server:
        child = pexpect.spawn(
            sys.executable,
            ["-m", "aptix", "chat"],
            env=_env(tmp_path, server.base_url, encoding),
            encoding="latin-1",  # every byte as one character: what was written, undecoded
            timeout=30,
            dimensions=(ROWS, COLUMNS),
        )
        child.logfile_read = log = io.StringIO()
        try:
            child.expect_exact("you>")
            child.sendline("Buy three")
            child.expect_exact("cleared?")
            child.expect_exact("you>")
            child.sendline("Charge it")
            answer_then_quit(child, "y", "Charged")
        finally:
            child.close()
        server.assert_complete()
    shown = log.getvalue()
    assert child.exitstatus == 0, shown
    assert "Traceback" not in shown
    widest = 0x7F if encoding == "ascii" else 0xFF
    assert max(ord(c) for c in shown) <= widest
    rows = _rows(shown)
    e = "<U+00E9>" if encoding == "ascii" else "\u00e9"
    assert any(r.startswith("Aptix chat - session ") for r in rows), rows
    assert any(r.startswith("  * agent_calculator(") and " -> " in r for r in rows), rows
    answer = f"agent> Caf{e} - r{e}sum{e} -> <U+4E2D><U+6587>, ^[[2Jcleared? 'no' <U+1F600>"
    assert answer in rows, rows
    assert "\x1b[2J" not in shown  # the model's escape shown, never sent
    assert "approval needed: Charge <U+4E2D><U+6587> - 59.97?" in rows, rows
    assert "agent> Charged <U+2713>" in rows, rows


def test_a_piped_chat_in_an_ascii_locale_writes_ascii(tmp_path: Path) -> None:
    with ScriptedOpenAIServer([reply(ANSWER)]) as server:
        env = _env(tmp_path, server.base_url, "ascii")
        done = subprocess.run(
            [sys.executable, "-m", "aptix", "chat"],
            input=b"Say it\n",
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert done.stderr == b""
    out = done.stdout.decode("ascii")
    assert "Aptix chat - session " in out
    assert "Caf<U+00E9> - r<U+00E9>sum<U+00E9> -> <U+4E2D><U+6587>, ^[[2Jcleared?" in out


def test_json_an_ascii_locale_cannot_carry_ends_with_one_error_line(tmp_path: Path) -> None:
    env = chat_env(tmp_path, "http://127.0.0.1:9/v1", rows=ROWS, columns=COLUMNS)
    title = "caf\u00e9 \u4e2d"
    aptix = [sys.executable, "-m", "aptix"]
    create = [*aptix, "sessions", "create", "--title", title]
    subprocess.run(create, env=env, capture_output=True, check=True, timeout=60)
    env = _env(tmp_path, "http://127.0.0.1:9/v1", "ascii")
    listed = [*aptix, "sessions", "list"]
    table = subprocess.run(listed, env=env, capture_output=True, check=False, timeout=60)
    assert table.returncode == 0, table.stderr
    assert b"caf<U+00E9> <U+4E2D>" in table.stdout
    as_json = subprocess.run([*listed, "--json"], env=env, capture_output=True, timeout=60)
    assert as_json.returncode == 1
    assert as_json.stderr.decode().splitlines() == [
        "error: Cannot write the output in the encoding ascii: ordinal not in range(128)."
    ]
