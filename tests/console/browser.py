"""The system Chromium under Playwright, and ``aptix serve`` processes for console tests.

Playwright never downloads a browser here: it drives the Debian ``chromium`` package
(``scripts/check`` installs it). Without it the tests fail, so a missing browser is seen.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn

from aptix.api import create_app
from aptix.settings import AptixSettings
from tests.api.live import free_port, serve_isolated

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
    # Only a failure waits this long.
    with serve_isolated(data_dir, data_dir / "serve.log", seconds=180, **env) as (url, _):
        yield url


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
