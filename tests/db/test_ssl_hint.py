"""A TLS handshake the PostgreSQL server refuses is told to fix ``?sslmode=``, not the server."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.databases import PG_HOST, PG_PORT, PG_USER


def test_sslmode_require_against_a_server_without_tls_names_sslmode() -> None:
    # The local cluster has no TLS, so require is refused at the handshake.
    # A database that does not exist: the handshake fails before it is looked for.
    url = f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/aptix_test_never_made?sslmode=require"
    done = subprocess.run(
        [sys.executable, "-m", "aptix", "sessions", "list"],
        env={**os.environ, "APTIX_DATABASE_URL": url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip()
    assert "?sslmode=require: " in line, line  # the value shown, the colon kept
    assert "set ?sslmode= in APTIX_DATABASE_URL to one the server supports" in line
    assert "check that the database server is running" not in line
