"""The processes ``aptix serve`` starts do not hold its listening socket.

Review r5 (round 70), F1: the listener was made inheritable even without ``--reload``, so a
stdio MCP server (spawned through uvloop, which hands on every inheritable descriptor) held
it. After a ``kill -9`` of the server the port stayed taken for as long as that child lived:
clients hung in the backlog instead of being refused, and the restart failed with "Port ...
is in use" (exit 2).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx
import pytest

from tests.api.live import _stop, _wait_healthy, free_port

HERE = Path(__file__).parent


def _listening_inodes(port: int) -> set[str]:
    """The inodes of the TCP sockets listening on ``port`` (state 0A in /proc/net/tcp)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":
                inodes.add(fields[9])
    return inodes


def _socket_inodes(pid: int) -> set[str]:
    """The inodes of the sockets among process ``pid``'s open file descriptors."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with suppress(FileNotFoundError):  # a descriptor closed while we look
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    return inodes


def _pids(pid_file: Path) -> list[int]:
    return [int(line) for line in pid_file.read_text().split()] if pid_file.exists() else []


@contextmanager
def _mcp_servers(pid_file: Path) -> Iterator[dict[str, str]]:
    """Settings for a lingering stdio MCP server; ends every one started, when the block ends."""
    servers = {"linger": {"command": sys.executable, "args": [str(HERE / "lingering_mcp.py")]}}
    servers["linger"]["args"].append(str(pid_file))
    try:
        yield {"APTIX_MCP_SERVERS": json.dumps(servers)}
    finally:
        for pid in _pids(pid_file):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _start(tmp_path: Path, port: int, *args: str, **env: str) -> subprocess.Popen[bytes]:
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith("APTIX_")},
        "APTIX_DATA_DIR": str(tmp_path),
        "APTIX_LOAD_PLUGINS": "false",
        "APTIX_SEMANTIC_MATCHING": "false",
        **env,
    }
    with (tmp_path / "serve.log").open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "aptix", "serve", "--demo", "--port", str(port), *args],
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,  # what --reload watches
        )


def _serving_with_mcp(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    """Wait until the server answers and lists the MCP server's tool (so that child runs)."""
    _wait_healthy(process, url, log)
    # Started with the app: /v1/tools answers once the MCP server's tools are listed.
    names = [tool["name"] for tool in httpx.get(f"{url}/v1/tools", timeout=30).json()]
    assert "linger_ping" in names, names


def test_a_restart_after_kill_9_binds_the_port_while_an_mcp_server_lives_on(
    tmp_path: Path,
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    pid_file = tmp_path / "mcp.pids"
    with _mcp_servers(pid_file) as env:
        first = _start(tmp_path, port, **env)
        try:
            _serving_with_mcp(first, url, tmp_path / "serve.log")
            [child] = _pids(pid_file)
            assert _listening_inodes(port)
            assert not _socket_inodes(child) & _listening_inodes(port)
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait()
        os.kill(child, 0)  # still running, as a server busy with a call would be
        # Nobody listens any more: refused at once, not accepted into a backlog nobody serves.
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=10).close()
        second = _start(tmp_path, port, **env)
        try:
            _serving_with_mcp(second, url, tmp_path / "serve.log")
        finally:
            _stop(second)


def test_the_mcp_servers_of_a_reloading_server_do_not_hold_its_socket(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    pid_file = tmp_path / "mcp.pids"
    with _mcp_servers(pid_file) as env:
        process = _start(tmp_path, port, "--reload", **env)
        try:
            _serving_with_mcp(process, url, tmp_path / "serve.log")
            [child] = _pids(pid_file)
            assert _listening_inodes(port)
            assert not _socket_inodes(child) & _listening_inodes(port)
        finally:
            _stop(process)
