"""``aptix config show`` masks a database URL's query values as the database errors do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aptix.cli.main import app
from tests.environment import own_settings

runner = CliRunner()

SECRET = "KeyPassphrase123"
URL = (
    "postgresql+asyncpg://app:pw@db.internal/aptix"
    f"?sslmode=verify-full&sslkey=/k.pem&sslpassword={SECRET}&foo=other-{SECRET}"
)
SHOWN = (
    "postgresql+asyncpg://app:***@db.internal/aptix"
    "?foo=***&sslkey=***&sslmode=verify-full&sslpassword=***"
)


@pytest.fixture(autouse=True)
def _clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own_settings(monkeypatch, tmp_path, tmp_path / "data")
    monkeypatch.setenv("APTIX_DATABASE_URL", URL)


def test_config_show_json_masks_the_database_urls_query_values() -> None:
    result = runner.invoke(app, ["config", "show", "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["database_url"] == SHOWN
    assert shown["effective_database_url"] == SHOWN
    assert SECRET not in result.stdout


def test_config_show_text_masks_the_database_urls_query_values() -> None:
    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 0, result.output
    assert f"database_url = {SHOWN}\n" in result.stdout
    assert f"effective_database_url = {SHOWN}\n" in result.stdout
    assert SECRET not in result.stdout
