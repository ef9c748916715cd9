"""A turn cut short by ``aptix serve``'s shutdown ends alike with and without ``--reload``.

Review s1 (round 70), F1: the reload children ran uvicorn's plain server, which cancels the
requests still running past its drain without marking the process stopping. Such a turn was
stored ``cancelled`` (its call "cancelled" in the transcript), so the retry its client should
make was refused, and the client got a bare 500 with a CancelledError traceback in the log.
Without ``--reload`` it gets a 503 ``shutting_down`` and the turn stays open for that retry.

The drain is shortened to a few seconds (``GRACEFUL_SECONDS``, read as serve configures
uvicorn) so that each case does not wait the 30 s a real one does.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from aptix.reasoner.call_states import SHUT_DOWN_RUNNING
from aptix.testing import call, reply
from aptix.testing.server import ScriptedOpenAIServer
from tests.api.live import _stop, _wait_healthy, free_port, scripted_model_env

# `python -m aptix`, with a drain short enough for a test.
PROGRAM = (
    "import aptix.reasoner.stopping as stopping\n"
    "stopping.GRACEFUL_SECONDS = 2\n"
    "from aptix.cli.main import main\n"
    "main()\n"
)

TOOL = '''
import asyncio
from pathlib import Path

import aptix


@aptix.tool(usage="Call this to wait.")
async def wait_long() -> str:
    """Wait far longer than the server's drain."""
    Path({started!r}).write_text("{version}")
    await asyncio.sleep(3600)
    return "waited"
'''


def _start(tmp_path: Path, llm: ScriptedOpenAIServer, *args: str) -> subprocess.Popen[bytes]:
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith("APTIX_")},
        **scripted_model_env(llm.base_url),
        "APTIX_DATA_DIR": str(tmp_path / "data"),
    }
    with (tmp_path / "serve.log").open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-c", PROGRAM, "serve", "--tools", "tools.py", *args],
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,  # what --reload watches
        )


def _wait_for(path: Path, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert process.poll() is None, f"aptix serve exited: {log.read_text()}"
        assert time.monotonic() < deadline, f"{path.name} not written: {log.read_text()}"
        time.sleep(0.05)


def _stored_turn(data_dir: Path) -> tuple[str, dict[str, Any]]:
    with sqlite3.connect(data_dir / "aptix.db") as db:
        [(status, data)] = db.execute("select status, data from turns").fetchall()
    return status, json.loads(data)


# A turn cut short is left running, its lease ended, as kill -9 leaves it; the process a
# reload starts next finds it so and records it ``interrupted``. Either way a retried resume
# takes it over, as a ``cancelled`` turn is not.
@pytest.mark.parametrize(
    ("args", "stop", "stored"),
    [
        pytest.param((), "sigterm", "running", id="serve-sigterm"),
        pytest.param(("--reload",), "sigterm", "running", id="reload-sigterm-to-the-reloader"),
        pytest.param(("--reload",), "edit", "interrupted", id="reload-on-a-file-edit"),
    ],
)
def test_a_turn_cut_short_by_the_shutdown_answers_503_and_stays_open(
    tmp_path: Path, args: tuple[str, ...], stop: str, stored: str
) -> None:
    started = tmp_path / "started"
    tools = tmp_path / "tools.py"
    tools.write_text(TOOL.format(started=str(started), version="v1"))
    log = tmp_path / "serve.log"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    answers: list[httpx.Response] = []
    with ScriptedOpenAIServer() as llm:
        llm.add(reply(None, call("wait_long", {}, id="c1")))
        process = _start(tmp_path, llm, "--port", str(port), *args)
        try:
            _wait_healthy(process, url, log)
            body = {"instruction": "wait"}
            asker = threading.Thread(
                target=lambda: answers.append(
                    httpx.post(f"{url}/v1/agent/execute", json=body, timeout=120)
                )
            )
            asker.start()
            _wait_for(started, process, log)
            if stop == "edit":
                tools.write_text(TOOL.format(started=str(started), version="v2"))
            else:
                process.send_signal(signal.SIGTERM)
            asker.join(timeout=120)
            if stop == "edit":  # the reloaded app serves again
                _wait_healthy(process, url, log)
        finally:
            _stop(process)
    [answer] = answers
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] == "shutting_down"
    output = log.read_text()
    assert "Traceback" not in output, output
    assert "Exception in ASGI application" not in output, output
    status, record = _stored_turn(tmp_path / "data")
    assert status == stored
    [entry] = record["tool_calls"]
    assert (entry["outcome"], entry["errorMessage"]) == ("unknown", SHUT_DOWN_RUNNING)
