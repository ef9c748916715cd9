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
