"""Creating the engine, migrating on first use, and handing out transactions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from aptix.errors import ConfigurationError

__all__ = ["Database", "open_database"]


class Database:
    """An async engine plus a session factory; ``transaction()`` is the unit of work."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)

    @property
    def is_sqlite(self) -> bool:
        """True for the embedded SQLite back end."""
        return self.engine.dialect.name == "sqlite"

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        """A session inside one transaction: committed on success, rolled back on error."""
        async with self._sessions() as session, session.begin():
            yield session

    async def close(self) -> None:
        """Dispose of the connection pool."""
        await self.engine.dispose()


def create_engine(url: str) -> AsyncEngine:
    """Create the async engine for ``url``; SQLite gets WAL, a busy timeout and write locks."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ConfigurationError(f"APTIX_DATABASE_URL is not a database URL: {url!r}.") from exc
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database and database != ":memory:":
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(parsed, connect_args={"timeout": 30})
        _configure_sqlite(engine)
        return engine
    if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() != "asyncpg":
        parsed = parsed.set(drivername="postgresql+asyncpg")
    try:
        return create_async_engine(parsed, pool_pre_ping=True)
    except Exception as exc:  # unknown dialect or a missing driver
        raise ConfigurationError(f"Cannot use database URL {url!r}: {exc}") from exc


def _configure_sqlite(engine: AsyncEngine) -> None:
    # pysqlite's implicit BEGIN is deferred: two writers can both read, then one fails at once
    # with "database is locked" when upgrading. BEGIN IMMEDIATE takes the write lock up front,
    # so concurrent writers queue on the busy timeout instead.
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


async def open_database(url: str, *, migrate: bool = True) -> Database:
    """Open the database at ``url`` and, by default, migrate it to the newest revision."""
    from aptix.db.migrate import upgrade_to_head

    database = Database(create_engine(url))
    if migrate:
        try:
            await upgrade_to_head(database.engine)
        except (OperationalError, DBAPIError, OSError) as exc:
            await database.close()
            safe = make_url(url).render_as_string(hide_password=True)
            raise ConfigurationError(f"Cannot open the database at {safe}: {exc}") from exc
    return database
