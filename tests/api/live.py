"""``aptix serve`` as a real subprocess on a free port, for end-to-end tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(data_dir: Path, **env: str) -> Iterator[str]:
    """Run ``aptix serve`` until the block ends; yields its base URL."""
    port = free_port()
    environment = {**os.environ, "APTIX_DATA_DIR": str(data_dir), **env}
    environment.pop("APTIX_API_KEYS", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "aptix", "serve", "--port", str(port)],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"aptix serve exited: {process.stdout.read() if process.stdout else ''}"
                )
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("aptix serve did not become healthy within 60 s")
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()
