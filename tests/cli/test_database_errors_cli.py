"""A database error met while a command runs is one line and exit code 1, never a traceback.

A SQLite file that can be read but not written (a read-only file or volume; here a URI with
``mode=ro``, which holds even for root) opens, since its revision is at the head, and the
first write fails. SQLite errors get hints about the file: SQLite has no server to check.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError
from typer.testing import CliRunner

from aptix.cli.main import app
from aptix.db.engine import failure_hint

runner = CliRunner()


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("APTIX_SEMANTIC_MATCHING", "false")


def _one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.fixture
def read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A session in a database file, then the same file opened read-only; the session's id."""
    database = tmp_path / "ro.db"
    monkeypatch.setenv("APTIX_DATABASE_URL", f"sqlite+aiosqlite:///{database}")
    created = runner.invoke(app, ["sessions", "create", "--json"])
    assert created.exit_code == 0, created.output
    monkeypatch.setenv(
        "APTIX_DATABASE_URL", f"sqlite+aiosqlite:///file:{database}?mode=ro&uri=true"
    )
    return str(json.loads(created.stdout)["sessionId"])


def test_a_write_to_a_read_only_database_is_one_line(read_only: str, tmp_path: Path) -> None:
    assert runner.invoke(app, ["sessions", "list"]).exit_code == 0  # reading works
    result = runner.invoke(app, ["sessions", "create"])
    assert result.exit_code == 1, result.output
    line = _one_line(result.stderr)
    assert line.startswith("error: The database at sqlite+aiosqlite:///file:"), line
    assert "attempt to write a readonly database" in line
    assert "writable" in line
    assert "server" not in line
    assert result.stdout == ""
    # The URI names no folder: none named "file:..." is made where the command runs.
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("file:")] == []


@pytest.mark.parametrize("as_json", [False, True])
def test_a_tool_that_meets_a_read_only_database_says_so_without_a_traceback(
    read_only: str, as_json: bool
) -> None:
    arguments = '{"mode": "calculation", "reason": "x", "branch": false}'
    command = ["tools", "call", "agent_change_mode", arguments, "--session-id", read_only]
    result = runner.invoke(app, [*command, *(["--json"] if as_json else [])])
    assert result.exit_code == 1, result.output
    line = _one_line(result.stderr)
    assert "attempt to write a readonly database" in line, line
    if as_json:
        assert json.loads(result.stdout)["successful"] is False
    else:
        assert line.startswith("error: ModeChangeTool failed to change the session mode. "), line


def test_a_file_that_is_not_a_database_gets_no_server_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "notes.db").write_text("not a database\n" * 100)
    monkeypatch.setenv("APTIX_DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path / 'notes.db'}")
    result = runner.invoke(app, ["sessions", "list"])
    assert result.exit_code == 2, result.output
    line = _one_line(result.stderr)
    assert "file is not a database — the file is not a SQLite database" in line, line
    assert "server" not in line


def _sqlite_error(words: str) -> OperationalError:
    return OperationalError("BEGIN IMMEDIATE", None, sqlite3.OperationalError(words))


@pytest.mark.parametrize(
    ("words", "hint"),
    [
        ("database is locked", "another process holds the SQLite file's write lock"),
        ("attempt to write a readonly database", "make the SQLite file and its folder writable"),
        ("database or disk is full", "free space on the disk"),
        ("unable to open database file", "names a SQLite file this user can read and write"),
    ],
)
def test_sqlite_errors_get_hints_about_the_file(words: str, hint: str) -> None:
    said = failure_hint("sqlite+aiosqlite:////data/aptix.db", _sqlite_error(words))
    assert hint in said
    assert "server" not in said


def test_a_postgresql_error_keeps_the_server_hint() -> None:
    said = failure_hint("postgresql+asyncpg://u@h/db", _sqlite_error("connection refused"))
    assert said == "check that the database server is running and APTIX_DATABASE_URL is right"
