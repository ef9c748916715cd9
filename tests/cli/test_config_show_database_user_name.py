"""``aptix config show`` shows a database URL's user name alike with or without a password.

The user name, the role Aptix connects as, was masked as ``***@`` when the URL had no
password (certificate, peer or trust authentication) and shown as ``bob:***@`` when it had
one (review s2, F5): the password and query values are what is masked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aptix.cli.main import app
from aptix.db.engine import shown_url
from tests.environment import own_settings

runner = CliRunner()
SECRET = "Pa55phrase"


@pytest.fixture(autouse=True)
def _clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own_settings(monkeypatch, tmp_path, tmp_path / "data")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql+asyncpg://bob@db.example.com:5433/app",
            "postgresql+asyncpg://bob@db.example.com:5433/app",
        ),
        (
            f"postgresql+asyncpg://bob:{SECRET}@db.example.com:5433/app",
            "postgresql+asyncpg://bob:***@db.example.com:5433/app",
        ),
        (
            f"postgresql+asyncpg://bob@db.example.com/app?sslmode=verify-full&sslpassword={SECRET}",
            "postgresql+asyncpg://bob@db.example.com/app?sslmode=verify-full&sslpassword=***",
        ),
    ],
)
def test_config_show_keeps_the_user_name_and_masks_the_rest(
    monkeypatch: pytest.MonkeyPatch, url: str, shown: str
) -> None:
    monkeypatch.setenv("APTIX_DATABASE_URL", url)
    as_json = runner.invoke(app, ["config", "show", "--json"])
    assert as_json.exit_code == 0, as_json.output
    values = json.loads(as_json.stdout)
    assert values["database_url"] == values["effective_database_url"] == shown
    as_text = runner.invoke(app, ["config", "show"])
    assert as_text.exit_code == 0, as_text.output
    assert f"database_url = {shown}\n" in as_text.stdout
    assert SECRET not in as_json.stdout + as_text.stdout


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        # SQLAlchemy reads the password up to its first '@' and the rest as the host; its own
        # hiding showed that rest of the password ('w@db').
        (
            f"postgresql://bob:{SECRET}@w@db/app",
            "postgresql://bob:***@db/app",
        ),
        ("postgresql+asyncpg://:pw@db/app", "postgresql+asyncpg://:***@db/app"),
        ("postgresql+asyncpg://bob:@db/app", "postgresql+asyncpg://bob:***@db/app"),
        (
            "postgresql+asyncpg://b%40o%3Ab:p%40w@db/app",
            "postgresql+asyncpg://b%40o%3Ab:***@db/app",
        ),
        # A URL SQLAlchemy cannot read is no user name it knows: the userinfo is masked whole.
        (
            f"postgresql+asyncpg://bob:{SECRET}@h1:5432,h2:5433/app",
            "postgresql+asyncpg://***@h1:5432,h2:5433/app",
        ),
    ],
)
def test_shown_url_keeps_only_what_sqlalchemy_reads_as_the_user(url: str, shown: str) -> None:
    assert shown_url(url) == shown
