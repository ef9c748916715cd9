"""``aptix serve`` on a port already in use: one ``error:`` line and exit code 2, no banner.

Review r2, F2: it printed "Aptix API on http://...:PORT" (where another program answered),
then uvicorn's six log lines with ``[Errno 98]`` among them, and exited 3, a code the README
does not list.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from aptix.cli import serve
from tests.api.live import free_port


def _serve(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "APTIX_DATA_DIR": str(tmp_path),
        "APTIX_SEMANTIC_MATCHING": "false",
        **extra,
    }
    return subprocess.run(
        [sys.executable, "-m", "aptix", "serve", "--demo", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_port_in_use_is_one_error_line_and_exit_code_2(tmp_path: Path) -> None:
    port = free_port()
    with socket.socket() as other:  # another program listening there
        other.bind(("127.0.0.1", port))
        other.listen()
        done = _serve(tmp_path, "--port", str(port))
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"error: Port {port} on 127.0.0.1 is in use (another program, or another aptix "
        "serve, listens there) — stop it, or choose another port with --port or APTIX_PORT"
    ]


def test_an_address_that_cannot_be_bound_is_one_error_line(tmp_path: Path) -> None:
    # 192.0.2.1 (TEST-NET-1) is no address of this host; not loopback, so a key is needed.
    port = free_port()
    done = _serve(tmp_path, "--host", "192.0.2.1", "--port", str(port), APTIX_API_KEYS="k1=o:u")
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"error: Cannot listen on 192.0.2.1 port {port}: "), line
    assert line.endswith("with --host or APTIX_HOST, or another port with --port or APTIX_PORT")


def test_a_port_taken_between_bind_and_listen_is_the_same_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Review s2 F1: two serves started together both bound the port (neither listened yet).

    The one that listened second died with a traceback (``OSError: [Errno 98]`` from
    ``listen``) and exit code 1, instead of the one line a port in use gets.
    """
    port = free_port()
    first, second = socket.socket(), socket.socket()
    with first, second:
        for sock in (first, second):  # as _bound binds: both succeed while neither listens
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))
        first.listen()
        with pytest.raises(typer.Exit) as exited:
            serve.listen(second)
    assert exited.value.exit_code == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: Port {port} on 127.0.0.1 is in use (another program, or another aptix "
        "serve, listens there) — stop it, or choose another port with --port or APTIX_PORT"
    ]
