"""The system Chromium under Playwright, and ``aptix serve`` processes for console tests.

Playwright never downloads a browser here: it drives the Debian ``chromium`` package
(``scripts/check`` installs it). Without it the tests fail, so a missing browser is seen.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn

from aptix.api import create_app
from aptix.settings import AptixSettings
from tests.api.live import free_port

VIEWPORT = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


def chromium_path() -> str:
    """The system Chromium; the test fails (it is not skipped) when it is missing."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail(
            "The console tests need the Debian 'chromium' package: apt-get install chromium "
            "(scripts/check installs it when it is missing).",
            pytrace=False,
        )
    return found


@contextmanager
def aptix_serve(data_dir: Path, **env: str) -> Iterator[str]:
    """``aptix serve`` on a free port with only ``env`` as its APTIX_ settings; its URL."""
    port = free_port()
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith("APTIX_")},
        "APTIX_DATA_DIR": str(data_dir),
        "APTIX_LOAD_PLUGINS": "false",
        "APTIX_SEMANTIC_MATCHING": "false",
        **env,
    }
    log = data_dir / "serve.log"
    with log.open("ab") as out:  # a file: a pipe could fill up and block the server
        process = subprocess.Popen(
            [sys.executable, "-m", "aptix", "serve", "--port", str(port)],
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180  # only a failure waits this long
        while True:
            assert process.poll() is None, f"aptix serve exited: {log.read_text()}"
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"not healthy in 180 s: {log.read_text()}"
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def in_process(settings: AptixSettings) -> Iterator[str]:
    """The same app under uvicorn in a thread of this process (no second interpreter start)."""
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=free_port(), log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 180
        while not server.started:
            assert thread.is_alive(), "uvicorn stopped before it started"
            assert time.monotonic() < deadline, "uvicorn did not start within 180 s"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
