"""``aptix chat --demo`` in a pty: the built-in demo model, with no endpoint and no key."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pexpect


def test_a_demo_turn_through_aptix_chat_calculates_and_asks_for_approval(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("APTIX_LLM_")}
    env.update(
        APTIX_DATA_DIR=str(tmp_path),
        APTIX_SEMANTIC_MATCHING="false",
        TERM="xterm",
        COLUMNS="160",
        LINES="40",
        NO_COLOR="1",
        PROMPT_TOOLKIT_NO_CPR="1",
    )
    child = pexpect.spawn(
        sys.executable,
        ["-m", "aptix", "chat", "--demo"],
        env=env,
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 160),
    )
    child.logfile_read = io.StringIO()
    try:
        child.expect_exact("Demo model:")
        child.expect_exact("you>")
        child.sendline("calculate 19.99*3")
        child.expect_exact("agent_calculator")  # the tool line
        child.expect_exact("(demo model) The calculator says 59.97.")
        child.expect_exact("you>")
        child.sendline("ask me for approval")
        child.expect_exact("approve? [y/n]")
        child.sendline("y")
        child.expect_exact("(demo model) You approved.")
        child.expect_exact("you>")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    assert "Traceback" not in child.logfile_read.getvalue()
