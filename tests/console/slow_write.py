"""A console chat whose model calls ``slow_write``: a 60 s write, not safe to run twice.

The tests that cut such a turn short (Cancel turn, kill -9, SIGTERM) share these: the model's
call, the server's settings, and the waits and counts around the write.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from playwright.sync_api import Locator, Page, Request, expect

from aptix.testing import call, reply
from aptix.testing.server import ScriptedOpenAIServer, Step
from tests.console.browser import scripted_env

HERE = Path(__file__).parent
SLOW_TOOL = HERE.parent / "reasoner" / "slow_side_effect.py"
INTERRUPTED = "Turn interrupted: the process running it stopped or lost contact with the database."
NOT_SENT_AGAIN = "Your message was not sent again: the tool calls above may have taken effect"


def slow_write_call(text: str) -> Step | None:
    """For "slow write <mark>", the model's call of slow_write(mark) for 60 s; else None."""
    if not text.startswith("slow write "):
        return None
    write = {"mark": text.removeprefix("slow write "), "seconds": 60}
    return reply(None, call("slow_write", write, id="slow-1"))


def slow_write_env(llm: ScriptedOpenAIServer, modes: Path, side_log: Path) -> dict[str, str]:
    """The server's settings: ``llm`` as its model, slow_write loaded, writing to ``side_log``."""
    return {
        **scripted_env(llm),
        "APTIX_MODES_PATH": str(modes),
        "APTIX_TOOL_MODULES": json.dumps([str(SLOW_TOOL)]),
        "SIDE_LOG": str(side_log),
    }


def started(page: Page, side_log: Path, mark: str) -> None:
    """Wait until slow_write(mark) has begun (the page's own waits keep its routes served)."""
    deadline = time.monotonic() + 60
    while f"start {mark}" not in (side_log.read_text() if side_log.exists() else ""):
        assert time.monotonic() < deadline, f"slow_write({mark}) never started"
        page.wait_for_timeout(50)


def recorded(page: Page) -> list[Request]:
    """The requests ``page`` sends from now on, as it sends them."""
    requests: list[Request] = []
    page.on("request", lambda request: requests.append(request))
    return requests


def posted(requests: list[Request]) -> list[Request]:
    """Those of ``requests`` that sent an instruction or answer to the agent."""
    return [r for r in requests if r.method == "POST" and r.url.endswith("/v1/agent/execute")]


def killed(page: Page, process: subprocess.Popen[Any]) -> Locator:
    """kill -9 the server mid-stream; the page's alert that the connection was lost."""
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    lost = page.get_by_role("alert").filter(has_text="The connection was lost")
    expect(lost).to_be_visible()
    return lost
