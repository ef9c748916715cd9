"""``aptix serve`` as a real subprocess on a free port, for end-to-end tests."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from aptix.testing.server import ScriptedOpenAIServer, Step


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Served:
    """A running ``aptix serve``: its base URL and process id."""

    url: str
    pid: int
    log: Path


def peak_rss_kib(pid: int) -> int:
    """The process's peak resident set size (``VmHWM``) in KiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.M).group(1))  # type: ignore[union-attr]


def scripted_model_env(base_url: str) -> dict[str, str]:
    """The settings of a server whose model is a scripted one at ``base_url`` (no plugins)."""
    return {
        "APTIX_LLM_BASE_URL": base_url,
        "APTIX_LLM_MODEL": "scripted",
        "APTIX_LLM_MAX_RETRIES": "0",
        "APTIX_LOAD_PLUGINS": "false",
        "APTIX_SEMANTIC_MATCHING": "false",
    }


@contextmanager
def serve_scripted(data_dir: Path, respond: Callable[[dict[str, Any]], Step]) -> Iterator[str]:
    """``aptix serve`` (isolated) whose model is a scripted one answering ``respond``; its URL."""
    with ScriptedOpenAIServer(respond=respond) as llm:
        env = scripted_model_env(llm.base_url)
        with serve_isolated(data_dir, data_dir / "serve.log", **env) as (url, _):
            yield url


@contextmanager
def serve(data_dir: Path, *args: str, **env: str) -> Iterator[str]:
    """Run ``aptix serve [args]`` until the block ends; yields its base URL."""
    with served(data_dir, *args, **env) as running:
        yield running.url


@contextmanager
def served(data_dir: Path, *args: str, **env: str) -> Iterator[Served]:
    """Run ``aptix serve [args]`` until the block ends; yields its URL and pid."""
    with served_many([data_dir], *args, **env) as running:
        yield running[0]


@contextmanager
def served_many(data_dirs: list[Path], *args: str, **env: str) -> Iterator[list[Served]]:
    """Run one ``aptix serve [args]`` per data directory, started together; yields them healthy."""
    started: list[tuple[subprocess.Popen[str], Served]] = []
    try:
        for data_dir in data_dirs:
            started.append(_start(data_dir, args, env))
        for process, running in started:
            _wait_healthy(process, running.url, running.log)
        yield [running for _, running in started]
    finally:
        for process, _ in started:
            process.terminate()
        for process, _ in started:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _start(
    data_dir: Path, args: tuple[str, ...], env: dict[str, str]
) -> tuple[subprocess.Popen[str], Served]:
    port = free_port()
    environment = {**os.environ, "APTIX_DATA_DIR": str(data_dir)}
    environment.pop("APTIX_API_KEYS", None)
    environment.update(env)
    log = data_dir / f"serve-{port}.log"
    # A file, not a pipe: a server writing more than a pipe holds would block on it.
    with log.open("w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "aptix", "serve", "--port", str(port), *args],
            env=environment,
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
        )
    return process, Served(f"http://127.0.0.1:{port}", process.pid, log)


@contextmanager
def serve_isolated(
    data_dir: Path, log: Path, seconds: float = 60, port: int | None = None, **env: str
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``aptix serve`` with only ``env`` as its APTIX_ settings (no plugins or semantic matching).

    Its output is appended to ``log`` (a pipe could fill up and block it); yields its URL and
    process once healthy, waiting ``seconds`` at the most. ``port``: a given one (a server
    started again where a page still points), else a free one.
    """
    port = port or free_port()
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith("APTIX_")},
        "APTIX_DATA_DIR": str(data_dir),
        "APTIX_LOAD_PLUGINS": "false",
        "APTIX_SEMANTIC_MATCHING": "false",
        **env,
    }
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "aptix", "serve", "--port", str(port)],
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(process, url, log, seconds)
        yield url, process
    finally:
        _stop(process)


def _wait_healthy(process: subprocess.Popen[Any], url: str, log: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        assert process.poll() is None, f"aptix serve exited: {log.read_text()}"
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"not healthy in {seconds:g} s: {log.read_text()}"
        time.sleep(0.1)


def _stop(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
