"""A PostgreSQL URL's query parameters reach asyncpg as it takes them, or stop with one line.

Managed databases hand out URLs with libpq's ``?sslmode=require``; SQLAlchemy passed it to
``asyncpg.connect`` as a keyword, and every command ended with a ``TypeError`` traceback.
A port out of range or a malformed IPv6 host did the same (``OverflowError``, ``ValueError``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from aptix.cli.main import app
from aptix.db.engine import create_engine, open_database
from aptix.db.postgres_url import asyncpg_arguments
from aptix.errors import ConfigurationError
from tests.databases import pg_url  # noqa: F401  (a fixture)

runner = CliRunner()


@pytest.fixture(autouse=True)
def _isolated_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APTIX_DATA_DIR", str(tmp_path))


def test_libpq_parameters_go_to_asyncpg_in_a_dsn_and_its_own_are_typed() -> None:
    url = make_url(
        "postgresql+asyncpg://u:p@h:5433/db?sslmode=require&sslrootcert=/ca.pem"
        "&application_name=aptix&connect_timeout=5&command_timeout=2.5"
        "&statement_cache_size=0&ssl=verify-full&direct_tls=false"
    )
    bare, arguments = asyncpg_arguments(url)
    assert bare.render_as_string(hide_password=False) == "postgresql+asyncpg://u:p@h:5433/db"
    assert arguments == {
        "dsn": "postgresql://?sslmode=require&sslrootcert=%2Fca.pem&application_name=aptix",
        "timeout": 5.0,
        "command_timeout": 2.5,
        "statement_cache_size": 0,
        "ssl": "verify-full",
        "direct_tls": False,
    }


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("foo=bar", "the query parameter 'foo', which neither Aptix nor its PostgreSQL driver"),
        ("channel_binding=require", "the query parameter 'channel_binding'"),
        ("server_settings=x", "the query parameter 'server_settings'"),
        ("timeout=abc", "query parameter 'timeout' must be a number of seconds above 0"),
        ("connect_timeout=-1", "query parameter 'connect_timeout' must be a number of seconds"),
        ("statement_cache_size=many", "'statement_cache_size' must be a whole number"),
        ("direct_tls=maybe", "'direct_tls' must be true or false"),
    ],
)
def test_a_parameter_asyncpg_cannot_take_is_named(query: str, said: str) -> None:
    with pytest.raises(ConfigurationError, match="APTIX_DATABASE_URL") as caught:
        create_engine(f"postgresql+asyncpg://u:secret@h/db?{query}")
    assert said in str(caught.value)
    assert "secret" not in caught.value.one_line()


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("postgresql://u@127.0.0.1:99999/x", "has the port 99999, which is not a port from 1"),
        ("postgresql://u@127.0.0.1:0/x", "has the port 0"),
        ("postgresql://u@[::1:5432/x", "is not a database URL: 'postgresql://***@[::1:5432/x'"),
        ("postgresql://u@h:abc/x", "is not a database URL"),
        ("postgresql://u@/x?host=h:99999", "the port '99999' in its query parameter 'host', which"),
        ("postgresql://u@/x?host=h&port=0", "has the port '0' in its query parameter 'port'"),
        (
            "postgresql://u@/x?host=h1,h2&port=5432,x",
            "has the port 'x' in its query parameter 'port'",
        ),
    ],
)
@pytest.mark.parametrize("command", [["db", "upgrade"], ["sessions", "list"]])
def test_a_bad_port_or_host_is_one_line_and_exit_code_2(
    url: str, said: str, command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APTIX_DATABASE_URL", url)
    result = runner.invoke(app, command)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: APTIX_DATABASE_URL "), result.stderr
    assert said in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_host_and_port_stay_in_the_url_for_sqlalchemy() -> None:
    url = make_url("postgresql://u@/db?host=/cloudsql/p:r:i&sslmode=disable&host=h2:5433&port=5432")
    bare, arguments = asyncpg_arguments(url)
    assert bare.query == {"host": ("/cloudsql/p:r:i", "h2:5433"), "port": "5432"}
    assert arguments == {"dsn": "postgresql://?sslmode=disable"}


async def _server_address(url: str) -> str | None:
    database = await open_database(url)
    try:
        async with database.engine.connect() as connection:
            address = await connection.scalar(text("SELECT host(inet_server_addr())"))
    finally:
        await database.close()
    return None if address is None else str(address)


async def test_the_host_parameter_reaches_a_unix_socket_or_a_host_and_port(
    pg_url: str,  # noqa: F811
) -> None:
    # libpq's and SQLAlchemy's ?host=: a unix socket's folder (Cloud SQL's /cloudsql/...), or
    # host:port. 01b6132 refused both as a parameter "neither Aptix nor asyncpg reads".
    parsed = make_url(pg_url)
    database = await open_database(pg_url, migrate=False)
    try:
        async with database.engine.connect() as connection:
            folders = await connection.scalar(text("SHOW unix_socket_directories"))
    finally:
        await database.close()
    socket_folder = str(folders).split(",")[0].strip()
    bare = f"postgresql://{parsed.username}@/{parsed.database}"
    assert await _server_address(f"{bare}?host={socket_folder}") is None  # a unix socket
    tcp = f"{bare}?host={parsed.host}:{parsed.port}&application_name=aptix_probe"
    assert await _server_address(tcp) == parsed.host


async def test_libpq_parameters_take_effect_on_postgresql(pg_url: str) -> None:  # noqa: F811
    url = pg_url.replace("postgresql+asyncpg://", "postgresql://")
    database = await open_database(f"{url}?sslmode=disable&application_name=aptix_probe")
    try:
        async with database.engine.connect() as connection:
            name = await connection.scalar(text("SELECT current_setting('application_name')"))
            encrypted = await connection.scalar(
                text("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            )
    finally:
        await database.close()
    assert name == "aptix_probe"
    assert encrypted is False


def test_sslmode_is_read_as_libpq_reads_it(
    pg_url: str,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # verify-full checks the server against this CA file before anything else: it is missing,
    # whether or not the server speaks TLS. Given to asyncpg as a keyword, sslmode was a
    # TypeError traceback.
    missing = tmp_path / "no-such-ca.pem"
    monkeypatch.setenv("APTIX_DATABASE_URL", f"{pg_url}?sslmode=verify-full&sslrootcert={missing}")
    result = runner.invoke(app, ["db", "upgrade"])
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert line.startswith("error: Cannot open the database at postgresql+asyncpg://"), line
    assert "No such file or directory" in line
    assert len(line.splitlines()) == 1
