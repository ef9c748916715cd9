"""``APTIX_DATABASE_URL`` in SQLAlchemy's usual SQLite form opens the file through aiosqlite.

``sqlite:///PATH`` names the stdlib driver, which the async engine cannot use: it is taken
as ``sqlite+aiosqlite:///PATH``, as ``postgresql://`` is taken as asyncpg. A SQLite driver
Aptix does not use is one line naming the setting (exit code 2), not a traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from aptix.cli.main import app
from aptix.db.engine import create_engine, open_database
from aptix.errors import ConfigurationError

runner = CliRunner()


@pytest.mark.parametrize("driver", ["sqlite", "sqlite+pysqlite"])
async def test_the_stdlib_driver_opens_the_file_through_aiosqlite(
    tmp_path: Path, driver: str
) -> None:
    database = await open_database(f"{driver}:///{tmp_path / 'aptix.db'}")
    try:
        assert database.engine.url.drivername == "sqlite+aiosqlite"
        assert database.is_sqlite
    finally:
        await database.close()
    assert (tmp_path / "aptix.db").is_file()


@pytest.mark.parametrize("command", [["db", "upgrade"], ["sessions", "list"]])
def test_a_sqlite_url_serves_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("APTIX_DATABASE_URL", f"sqlite:///{tmp_path / 'mine.db'}")
    result = runner.invoke(app, command)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "mine.db").is_file()


def test_another_sqlite_driver_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite+pysqlcipher:///{tmp_path / 'x.db'}"
    with pytest.raises(ConfigurationError, match="SQLite driver 'pysqlcipher'"):
        create_engine(url)
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("APTIX_DATABASE_URL", url)
    result = runner.invoke(app, ["sessions", "list"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: APTIX_DATABASE_URL names the SQLite driver")
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1
