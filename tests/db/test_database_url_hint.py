"""A bad ``APTIX_DATABASE_URL``'s hint shows where the credentials go, as the README quotes it.

Every ``error:`` line and log line goes through the credential masker, which turned the hint's
template ``postgresql+asyncpg://USER:PASSWORD@HOST/DB`` into ``postgresql+asyncpg://***@HOST/DB``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HINT = (
    "set APTIX_DATABASE_URL to sqlite+aiosqlite:///<PATH> or "
    "postgresql+asyncpg://<USER>:<PASSWORD>@<HOST>/<DB>, or unset it for the embedded "
    "SQLite file"
)


def _aptix(tmp_path: Path, url: str, *args: str, json_logs: bool = False) -> str:
    env = {
        **os.environ,
        "APTIX_DATA_DIR": str(tmp_path),
        "APTIX_DATABASE_URL": url,
        "APTIX_LOG_JSON": "true" if json_logs else "false",
    }
    done = subprocess.run(
        [sys.executable, "-m", "aptix", *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    return done.stderr.strip()


def test_the_readme_line_is_what_serve_prints(tmp_path: Path) -> None:
    line = _aptix(tmp_path, "garbage", "serve", "--port", "0")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert line.startswith("error: APTIX_DATABASE_URL is not a database URL: 'garbage'. — ")
    assert line.endswith(HINT)
    assert line in readme.splitlines()


@pytest.mark.parametrize("json_logs", [False, True])
def test_the_hint_is_not_masked_where_the_url_is(tmp_path: Path, json_logs: bool) -> None:
    stderr = _aptix(tmp_path, "mysql://u:s3cret@h/db", "sessions", "list", json_logs=json_logs)
    message = json.loads(stderr)["message"] if json_logs else stderr
    assert "s3cret" not in message
    assert message.endswith(HINT)
