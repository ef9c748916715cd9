"""A SQLite URL's options are shown, not masked: ``mode=ro`` says why (review r8 F4).

``?mode=ro&uri=true`` was shown as ``?mode=***&uri=***`` in ``aptix config show`` and in the
error of a write, whose hint sent the user to the file's permissions: the one word that said
why was hidden as if it were a secret. A SQLite URL has no secret in its query (its options
are the file's: ``mode``, ``cache``, ``immutable``...); a password anywhere is still masked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aptix.cli.main import app
from aptix.urls import mask_credentials, mask_url
from tests.environment import own_settings

runner = CliRunner()


@pytest.fixture
def read_only_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A migrated database file, then APTIX_DATABASE_URL opening it read-only."""
    own_settings(monkeypatch, tmp_path, tmp_path / "data")
    monkeypatch.setenv("APTIX_SEMANTIC_MATCHING", "false")
    database = tmp_path / "ro.db"
    monkeypatch.setenv("APTIX_DATABASE_URL", f"sqlite+aiosqlite:///{database}")
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    url = f"sqlite+aiosqlite:///file:{database}?mode=ro&uri=true"
    monkeypatch.setenv("APTIX_DATABASE_URL", url)
    return url


def test_a_write_through_a_read_only_url_names_mode_ro(read_only_url: str) -> None:
    result = runner.invoke(app, ["sessions", "create"])
    assert result.exit_code == 1, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"error: The database at {read_only_url} failed: "), line
    assert "attempt to write a readonly database" in line
    # The hint names the URL's option, not only the file's permissions.
    assert "opens the SQLite file read-only (mode=ro)" in line
    assert "***" not in line


def test_config_show_keeps_a_sqlite_urls_options(read_only_url: str) -> None:
    shown = runner.invoke(app, ["config", "show", "--json"])
    assert shown.exit_code == 0, shown.output
    values = json.loads(shown.stdout)
    assert values["database_url"] == read_only_url
    assert values["effective_database_url"] == read_only_url
    text = runner.invoke(app, ["config", "show"])
    assert f"database_url = {read_only_url}\n" in text.stdout


def test_only_secrets_are_masked() -> None:
    sqlite = "sqlite+aiosqlite:///file:/srv/a.db?mode=ro&cache=shared&immutable=1&uri=true"
    assert mask_url(sqlite) == sqlite
    assert mask_credentials(f"at {sqlite}: failed") == f"at {sqlite}: failed"
    # A SQLite driver that takes a passphrase takes it as the password: still masked.
    assert mask_url("sqlite+pysqlcipher://:hunter2@/a.db?cipher=aes") == (
        "sqlite+pysqlcipher://***@/a.db?cipher=aes"
    )
    # Any other URL's query values stay masked but the known settings (a gateway's api-key).
    assert mask_credentials("https://gw/v1?api-key=s3cret&mode=x") == (
        "https://gw/v1?api-key=***&mode=***"
    )
    assert mask_url("postgresql://u:p@h/db?sslmode=require&password=p") == (
        "postgresql://***@h/db?sslmode=require&password=***"
    )
