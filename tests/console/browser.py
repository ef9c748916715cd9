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
import yaml
from playwright.sync_api import Page, expect

from aptix.api import create_app
from aptix.settings import AptixSettings
from aptix.testing.server import ScriptedOpenAIServer
from tests.api.live import free_port, serve_isolated

#: The built-in catalog of modes.
CATALOG = Path(__file__).parents[2] / "src" / "aptix" / "modes" / "catalog.yaml"
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


def modes_offering(directory: Path, tool: str) -> Path:
    """The built-in catalog, ``tool`` offered in its default mode, as ``directory/modes.yaml``."""
    catalog = yaml.safe_load(CATALOG.read_text(encoding="utf-8"))
    for mode in catalog["modes"]:
        if mode.get("isDefault"):
            mode["tools"].append(tool)
    path = directory / "modes.yaml"
    path.write_text(yaml.safe_dump(catalog), encoding="utf-8")
    return path


def scripted_env(llm: ScriptedOpenAIServer) -> dict[str, str]:
    """Settings of a server whose model is ``llm``, never retried; key-a is ann of acme, admin."""
    return {
        "APTIX_API_KEYS": "key-a=acme:ann:admin",
        "APTIX_LLM_MODEL": "scripted",
        "APTIX_LLM_BASE_URL": llm.base_url,
        "APTIX_LLM_MAX_RETRIES": "0",
    }


def new_chat(page: Page, url: str, text: str) -> None:
    """Open a new chat of the console at ``url``, in the default mode, and send ``text``."""
    page.goto(f"{url}/console/#/chat")
    expect(page.locator("#chat-mode")).to_have_text("general")
    page.get_by_label("Message").fill(text)
    page.get_by_role("button", name="Send").click()


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
