"""``aptix mcp`` over stdio as a client drives it: messages in, one answer a line read back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any


def mcp_env(data_dir: Path) -> dict[str, str]:
    """The shell's environment with Aptix's data in ``data_dir`` and no embedding model."""
    return {**os.environ, "APTIX_DATA_DIR": str(data_dir), "APTIX_SEMANTIC_MATCHING": "false"}


def stdio_answers(data_dir: Path, lines: list[str], **env: str) -> list[Any]:
    """What ``aptix mcp`` answers ``lines``: a line read back for each but a notification, as JSON
    (None at its end).

    The input stays open until every answer is read, as a client's does: at its end the server
    stops. A server that never answers is killed after a minute.
    """
    process = subprocess.Popen(
        [sys.executable, "-m", "aptix", "mcp"],
        env={**mcp_env(data_dir), **env},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    watchdog = threading.Timer(60, process.kill)
    watchdog.start()
    try:
        process.stdin.write("\n".join(lines) + "\n")
        process.stdin.flush()
        answered = [line for line in lines if not _notification(line)]
        return [json.loads(process.stdout.readline() or "null") for _ in answered]
    finally:
        watchdog.cancel()
        process.stdin.close()
        process.wait(timeout=60)
        process.stdout.close()


def _notification(line: str) -> bool:
    """Whether ``line`` is a JSON-RPC notification (a method without an id): never answered."""
    try:
        message = json.loads(line)
    except ValueError:
        return False
    return isinstance(message, dict) and "method" in message and "id" not in message
