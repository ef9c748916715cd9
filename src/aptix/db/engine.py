"""Creating the engine, migrating on first use, and handing out transactions."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from weakref import WeakKeyDictionary

from sqlalchemy import Connection, Engine, event, text
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from aptix.db.hidden_values import hide_values_in_errors
from aptix.db.outage import database_refusal, mark_from_aptix_database
from aptix.db.postgres_url import asyncpg_arguments
from aptix.db.sqlite_file import SqliteFile
from aptix.errors import ConfigurationError
from aptix.urls import mask_credentials, mask_url

if TYPE_CHECKING:
    from aptix.db.migrate import Upgrade

__all__ = [
    "MIGRATE_RIGHTS_HINT",
    "UNREACHABLE_HINT",
    "WRITE_RIGHTS_HINT",
    "Database",
    "driver_message",
    "failure_hint",
    "open_database",
    "shown_url",
]

T = TypeVar("T")

#: How long a unit of work on a SQLite file waits for the file's write lock, queueing in this
#: process included, before it fails with "database is locked" (503 ``database_unavailable``).
BUSY_TIMEOUT_SECONDS = 30.0
_BUSY_TIMEOUT_MS = int(BUSY_TIMEOUT_SECONDS * 1000)
#: The execution option of a SQLite connection that only reads: it takes no write lock.
_READS_ONLY = "aptix_reads_only"
#: Where a pooled SQLite connection keeps the busy timeout it was last given, in ms.
_BUSY_MS = "aptix_busy_timeout_ms"
#: How long a unit of work waits for a SQLite file's write lock before it logs that it waits:
#: this process's units queue for the lock before they reach SQLite, so a wait there longer
#: than a moment is for another process (the ``sqlite3`` shell, a backup, another command).
LOCK_NOTICE_SECONDS = 1.0
_LOCK_NOTICE_MS = int(LOCK_NOTICE_SECONDS * 1000)
#: How long a SQLite engine's Database lets a unit of work wait for the write lock, in ms,
#: asked just before ``BEGIN IMMEDIATE`` (an engine's listeners cannot be ordered: one added
#: later runs after, whatever it asks).
_BEFORE_BEGIN: WeakKeyDictionary[Engine, Callable[[], int]] = WeakKeyDictionary()
_log = logging.getLogger("aptix.db")


class Database:
    """An async engine plus a session factory; ``transaction()`` is the unit of work.

    ``run(fn)`` is the fast path for short Core transactions (the turn store's): on a SQLite
    file, ``fn`` runs whole on one worker thread with its own pysqlite connection, so a
    transaction costs one thread hop instead of aiosqlite's one per cursor call (a k=0 turn
    made 24); on PostgreSQL it runs on the async engine, where asyncpg needs no thread.
    ``run_one(fn)`` is for an ``fn`` of one statement: on PostgreSQL that statement is its own
    transaction, one round trip instead of three (``BEGIN``, the statement, ``COMMIT``).
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)
        # Every SQLite transaction takes the write lock (BEGIN IMMEDIATE). Waiting for it in
        # SQLite's busy handler means sleeping and polling: under concurrency, turns queued
        # for seconds. Queueing on an asyncio lock first hands the lock over at once, in
        # order; other processes still meet the busy timeout.
        self._write_lock = asyncio.Lock() if self.is_sqlite else None
        #: The longest a SQLite unit of work waits for the write lock, in the queue and in SQLite.
        self.busy_timeout = BUSY_TIMEOUT_SECONDS
        # When the unit holding ``_write_lock`` must have SQLite's lock (time.monotonic()).
        self._deadline: float | None = None
        # The same pool; a connection checked out here sends no BEGIN, so each statement is a
        # transaction of its own that the server commits (durably: synchronous_commit stands)
        # before it answers. Setting and resetting the level on checkout costs no round trip.
        self._autocommit = (
            None if self.is_sqlite else engine.execution_options(isolation_level="AUTOCOMMIT")
        )
        self.sync_engine: Engine | None = None
        self._worker: ThreadPoolExecutor | None = None
        self._file: SqliteFile | None = None
        # What migrating did as ``open_database`` opened it (None: it did not migrate).
        self.upgrade: Upgrade | None = None
        database = engine.url.database or ""
        if self.is_sqlite and database and database != ":memory:":
            # The same file through the stdlib driver: a second engine, not a second database.
            self.sync_engine = create_sync_engine(
                engine.url.set(drivername="sqlite"),
                connect_args={"timeout": BUSY_TIMEOUT_SECONDS},
                hide_parameters=True,
            )
            _configure_sqlite(self.sync_engine)
            _BEFORE_BEGIN[self.sync_engine] = self._wait_left_ms
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="aptix-sqlite")
            self._file = SqliteFile(database)
            self._file.check()
        if self.is_sqlite:
            _BEFORE_BEGIN[engine.sync_engine] = self._wait_left_ms

    @property
    def is_sqlite(self) -> bool:
        """True for the embedded SQLite back end."""
        return self.engine.dialect.name == "sqlite"

    # Each unit of work marks what it raises as Aptix's database's (``from_aptix_database``):
    # only those errors may answer database_refused or database_unavailable when they reach
    # the executor through a tool, whose own database or socket raise the same classes.

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        """A session inside one transaction: committed on success, rolled back on error."""
        try:
            async with self._locked(), self._sessions() as session, session.begin():
                yield session
        except Exception as exc:
            mark_from_aptix_database(exc)
            raise

    async def run(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in one transaction: committed on success, rolled back on error."""
        try:
            if self._worker is None:
                async with self._locked(), self.engine.begin() as connection:
                    return await connection.run_sync(fn)
            async with self._locked():
                loop = asyncio.get_running_loop()
                return await loop.run_in_executor(self._worker, self._run, fn)
        except Exception as exc:
            mark_from_aptix_database(exc)
            raise

    async def run_one(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn``, which issues a single statement, as one transaction of its own."""
        if self._autocommit is None:
            return await self.run(fn)
        try:
            async with self._autocommit.connect() as connection:
                return await connection.run_sync(fn)
        except Exception as exc:
            mark_from_aptix_database(exc)
            raise

    async def read_one(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn``, which issues a single statement that only reads (``run_one`` on PostgreSQL).

        On SQLite it neither queues for the write lock nor takes it: in WAL mode a read waits
        for no writer, so a lock another process holds does not hold it up.
        """
        if self._file is None:
            # PostgreSQL; or SQLite in memory, whose one shared connection a read's rollback
            # on its return to the pool would roll back under another unit of work.
            return await self.run_one(fn)
        try:
            self._file.check()  # a read of a file that was replaced would answer wrongly
            async with self.engine.connect() as connection:
                await connection.execution_options(**{_READS_ONLY: True})
                return await connection.run_sync(fn)
        except Exception as exc:
            mark_from_aptix_database(exc)
            raise

    def _run(self, fn: Callable[[Connection], T]) -> T:
        assert self.sync_engine is not None
        with self.sync_engine.begin() as connection:
            return fn(connection)

    async def ping(self) -> None:
        """Raise unless the database answers (and, on SQLite, its file is still in place)."""
        if self.is_sqlite:
            # The file checked and its first page read, without the write lock another
            # process may hold for a while: /healthz answers at once.
            await self.read_one(lambda c: c.exec_driver_sql("PRAGMA schema_version").scalar())
            return
        try:
            async with self.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        except Exception as exc:
            mark_from_aptix_database(exc)
            raise

    @asynccontextmanager
    async def _locked(self) -> AsyncIterator[None]:
        """Hold the write lock: queueing here and waiting in SQLite share one busy timeout.

        Without it for the queue, a lock held by another process for minutes made each unit
        queued behind it wait for all those before it (a busy timeout each) and then its own.
        """
        if self._write_lock is None:
            yield
            return
        deadline = time.monotonic() + self.busy_timeout
        try:
            async with asyncio.timeout(self.busy_timeout):
                await self._write_lock.acquire()
        except TimeoutError:
            raise _still_locked() from None
        try:
            if self._file is not None:
                self._file.check()  # a unit of work on a removed file would be lost
            self._deadline = deadline
            yield
        finally:
            self._deadline = None
            self._write_lock.release()

    def _wait_left_ms(self) -> int:
        """What is left of the unit's busy timeout, for SQLite, before it begins waiting."""
        deadline = self._deadline  # None: no unit of work (migrating, on one connection)
        if deadline is None:
            return _BUSY_TIMEOUT_MS
        return max(0, int((deadline - time.monotonic()) * 1000))

    async def close(self) -> None:
        """Dispose of the connection pools and the worker thread."""
        if self._worker is not None and self.sync_engine is not None:
            await asyncio.get_running_loop().run_in_executor(self._worker, self.sync_engine.dispose)
            self._worker.shutdown()
        await self.engine.dispose()


#: Connections each process keeps open to PostgreSQL, and how many more it may open at a peak.
POOL_SIZE = 20
POOL_OVERFLOW = 10

#: The placeholders are in angle brackets, which end a URL for the credential masker
#: (aptix.urls) that every ``error:`` line and log line goes through: written as a URL, the
#: template's ``USER:PASSWORD@`` was shown as ``***@``, hiding where the credentials go.
URL_HINT = (
    "set APTIX_DATABASE_URL to sqlite+aiosqlite:///<PATH> or "
    "postgresql+asyncpg://<USER>:<PASSWORD>@<HOST>/<DB>, or unset it for the embedded "
    "SQLite file"
)


def create_engine(url: str) -> AsyncEngine:
    """Create the async engine for ``url``; SQLite gets WAL, a busy timeout and write locks."""
    # hide_parameters: statement parameters are user text (instructions, titles); errors and
    # echo must not carry them into logs.
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:  # ValueError: a port that is not a number
        raise ConfigurationError(
            f"APTIX_DATABASE_URL is not a database URL: {mask_url(url)!r}.", hint=URL_HINT
        ) from exc
    if parsed.port is not None and not 0 < parsed.port < 65536:
        raise ConfigurationError(
            f"APTIX_DATABASE_URL has the port {parsed.port}, which is not a port from 1 to 65535.",
            hint=URL_HINT,
        )
    if parsed.get_backend_name() == "sqlite":
        # sqlite:// (SQLAlchemy's usual form, the stdlib driver) means the same file through
        # aiosqlite, as postgresql:// means asyncpg below; another driver is refused.
        if parsed.get_driver_name() not in ("pysqlite", "aiosqlite"):
            raise ConfigurationError(
                f"APTIX_DATABASE_URL names the SQLite driver {parsed.get_driver_name()!r}, "
                "which Aptix does not use.",
                hint=URL_HINT,
            )
        parsed = parsed.set(drivername="sqlite+aiosqlite")
        database = parsed.database or ""
        # With ?uri=true the name is a URI (file:PATH?mode=ro): its folder is no folder to make.
        if database and database != ":memory:" and not _is_uri(parsed):
            folder = Path(database).expanduser().parent
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigurationError(
                    f"Cannot create the folder {folder} for the SQLite database ({exc}).",
                    hint="set APTIX_DATA_DIR (or APTIX_DATABASE_URL) to a writable place",
                ) from exc
        engine = create_async_engine(
            parsed, connect_args={"timeout": BUSY_TIMEOUT_SECONDS}, hide_parameters=True
        )
        _configure_sqlite(engine.sync_engine)
        _closing_when_cancelled(engine.sync_engine)
        return engine
    if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() != "asyncpg":
        parsed = parsed.set(drivername="postgresql+asyncpg")
    connect_args: dict[str, Any] = {}
    if parsed.get_backend_name() == "postgresql":
        parsed, connect_args = asyncpg_arguments(parsed)
    try:
        # No pre-ping: it cost a round trip on every checkout, two per turn (a k=0 turn went
        # from 8 round trips to 10). A connection that died (a restarted server) fails its
        # request with a disconnect, which invalidates the whole pool: that request answers
        # 503 (api/outage.py) and the next one gets a fresh connection.
        # A pool as large as the concurrency a process serves: SQLAlchemy closes an overflow
        # connection when it is returned, so a pool of 5 under 16 concurrent turns opened a
        # new PostgreSQL connection (a server process fork) for most transactions.
        engine = create_async_engine(
            parsed,
            hide_parameters=True,
            pool_size=POOL_SIZE,
            max_overflow=POOL_OVERFLOW,
            connect_args=connect_args,
        )
    except Exception as exc:  # unknown dialect or a missing driver
        raise ConfigurationError(
            f"Cannot use database URL {mask_url(url)!r}: {mask_credentials(str(exc))}",
            hint=URL_HINT,
        ) from exc
    hide_values_in_errors(engine.sync_engine)
    return engine


def _still_locked() -> OperationalError:
    """What SQLite raises when its busy timeout runs out, for a unit that ran out in the queue.

    Every surface answers it already: 503 ``database_unavailable``, the CLI's lock hint.
    """
    return OperationalError("BEGIN IMMEDIATE", None, sqlite3.OperationalError("database is locked"))


def _is_uri(url: URL) -> bool:
    return str(url.query.get("uri", "")).lower() in ("true", "1")


async def _connected_or_closed(*args: Any, **kwargs: Any) -> Any:
    """``aiosqlite.connect``, except that a cancelled connect closes what it was opening first.

    Cancelled (Ctrl-C as a command starts), aiosqlite's own connect returns at once and leaves
    its thread opening the file: the thread then answers an event loop that may be closed by
    then, and prints "Event loop is closed" in a thread traceback on the way out.
    """
    import aiosqlite

    connection = aiosqlite.connect(*args, **kwargs)
    # As SQLAlchemy's own connect does: a connection left open never holds the process up.
    connection._thread.daemon = True
    opening: asyncio.Future[aiosqlite.Connection] = asyncio.ensure_future(connection)
    try:
        return await asyncio.shield(opening)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):  # a file it could not open: nothing to close
            await (await opening).close()
        raise


def _closing_when_cancelled(engine: Engine) -> None:
    """Open the aiosqlite engine's connections with :func:`_connected_or_closed`."""

    @event.listens_for(engine, "do_connect")
    def _on_do_connect(_dialect: Any, _record: Any, _args: Any, params: dict[str, Any]) -> None:
        # The dialect still connects, with the URL's arguments, through this in place of
        # aiosqlite.connect (SQLAlchemy's async_creator takes the same road).
        params["async_creator_fn"] = _connected_or_closed


def _configure_sqlite(engine: Engine) -> None:
    # pysqlite's implicit BEGIN is deferred: two writers can both read, then one fails at once
    # with "database is locked" when upgrading. BEGIN IMMEDIATE takes the write lock up front,
    # so concurrent writers queue on the busy timeout instead.
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
        # WAL + NORMAL stays consistent after a crash; only the last commits may be lost
        # on power failure, the usual trade for an embedded store.
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        if connection.get_execution_options().get(_READS_ONLY):
            return  # in WAL mode a read waits for no writer, and one statement needs no BEGIN
        before = _BEFORE_BEGIN.get(connection.engine)
        _begin_immediate(connection, _BUSY_TIMEOUT_MS if before is None else before())


def _begin_immediate(connection: Connection, wait_ms: int) -> None:
    """``BEGIN IMMEDIATE``, waiting up to ``wait_ms`` for the write lock; a long wait is logged.

    The first second is tried alone: a lock still held then is another process's, and a
    command would otherwise wait the whole busy timeout (30 s) without a word.
    """
    if wait_ms > _LOCK_NOTICE_MS:
        _busy_timeout(connection, _LOCK_NOTICE_MS)
        started = time.monotonic()
        try:
            connection.exec_driver_sql("BEGIN IMMEDIATE")
            return
        except OperationalError as exc:
            if "database is locked" not in driver_message(exc):
                raise
        wait_ms = max(0, wait_ms - int((time.monotonic() - started) * 1000))
        _log.warning(
            "The SQLite file %s is locked by another process: waiting up to %d s for its "
            "write lock.",
            connection.engine.url.database,
            round(wait_ms / 1000),
        )
    _busy_timeout(connection, wait_ms)
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def _busy_timeout(connection: Connection, wanted: int) -> None:
    """Give the connection's next wait for a lock ``wanted`` ms."""
    # Set only when it changes by more than a moment: an unqueued unit costs no statement.
    if abs(connection.info.get(_BUSY_MS, _BUSY_TIMEOUT_MS) - wanted) > 100:
        connection.exec_driver_sql(f"PRAGMA busy_timeout = {wanted}")
        connection.info[_BUSY_MS] = wanted


async def open_database(url: str, *, migrate: bool = True) -> Database:
    """Open the database at ``url`` and, by default, migrate it to the newest revision."""
    from aptix.db.migrate import upgrade_to_head

    database = Database(create_engine(url))
    if migrate:
        try:
            await _first_connection(database, url)
            database.upgrade = await upgrade_to_head(database.engine)
        except ConfigurationError:
            await database.close()
            raise
        except (OperationalError, DBAPIError, OSError) as exc:
            hint = failure_hint(url, exc, migrating=True)
            if _clashes_with_the_tables(exc):
                hint = await _mismatch_hint(database)
            await database.close()
            raise ConfigurationError(
                f"Cannot open the database at {shown_url(url)}: {driver_message(exc)}", hint=hint
            ) from exc
        except BaseException:  # cancelled (Ctrl-C): the connections it opened are closed too
            await database.close()
            raise
    if database._file is not None:
        database._file.check()  # the file migrating just created is the one to keep using
    return database


async def _first_connection(database: Database, url: str) -> None:
    """Connect once: a URL the driver cannot use is one line, not a traceback.

    The driver checks what the URL gives it only as it connects, with errors that are no
    database errors (a value of the wrong type, an IPv6 host it cannot read).
    """
    try:
        async with database.engine.connect():
            pass
    except (TypeError, ValueError, OverflowError) as exc:
        raise ConfigurationError(
            f"The database driver cannot use APTIX_DATABASE_URL {shown_url(url)}: "
            f"{driver_message(exc)}",
            hint=URL_HINT,
        ) from exc


def shown_url(url: str) -> str:
    """``url`` as it may be shown: password and query values hidden, the user name kept.

    SQLite's spelling is kept, and its query too: the file's options (``mode=ro``), no secret.
    A URL SQLAlchemy cannot read has its userinfo masked whole.
    """
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return mask_url(url)
    if parsed.get_backend_name() == "sqlite":  # SQLAlchemy would write file:PATH as file%3APATH
        return mask_url(url)
    # The user name is the role Aptix connects as, no secret, and shown with a password or
    # without. One masker hides the rest: SQLAlchemy's own hiding (hide_password) showed what
    # follows an '@' in a password as the host, and left the query values.
    return mask_url(parsed.render_as_string(hide_password=False), keep_user=True)


#: SQLite's words for its failures, and what to do about each; SQLite has no server to check.
_SQLITE_HINTS = (
    (
        "readonly",
        "make the SQLite file and its folder writable by this user (SQLite writes -wal and -shm "
        "files beside it), or set APTIX_DATABASE_URL to a writable file in a writable folder",
    ),
    (
        "locked",
        f"another process holds the SQLite file's write lock (Aptix waits "
        f"{BUSY_TIMEOUT_SECONDS:g} s for it): let it finish or stop it, then retry",
    ),
    ("disk is full", "free space on the disk that holds the SQLite file"),
    (
        "not a database",
        "the file is not a SQLite database: set APTIX_DATABASE_URL (or APTIX_DATA_DIR) to Aptix's "
        "database file, or to a new one",
    ),
)


#: The hint for a database server that cannot be reached (or a URL naming the wrong one).
UNREACHABLE_HINT = "check that the database server is running and APTIX_DATABASE_URL is right"
#: The hint for a TLS handshake the server refused, or an ``sslmode`` the driver does not know.
SSL_HINT = (
    "set ?sslmode= in APTIX_DATABASE_URL to one the server supports (disable, prefer, "
    "require, verify-ca, verify-full; require and stricter need TLS on the server)"
)
#: The hint for a PostgreSQL role that may read Aptix's tables but not write them, or a
#: database that takes no writes.
WRITE_RIGHTS_HINT = (
    "grant the role in APTIX_DATABASE_URL the rights docs/deployment.md lists (CONNECT; "
    "SELECT, INSERT, UPDATE and DELETE on Aptix's tables; USAGE on their sequences), on a "
    "database that accepts writes"
)
#: The hint for a role refused while migrating: changing tables takes their owner.
MIGRATE_RIGHTS_HINT = (
    "the role in APTIX_DATABASE_URL may not migrate Aptix's tables: run `aptix db upgrade` "
    "once as their owner, and grant this role the rights docs/deployment.md lists"
)


def failure_hint(url: str, exc: BaseException, *, migrating: bool = False) -> str:
    """How to fix what ``exc`` says about the database at ``url``, as an ``error:`` hint.

    ``migrating``: ``exc`` came from migrating the database, where a refusal past connecting
    means the role does not own the tables, not that it lacks a ``GRANT``.
    """
    try:
        sqlite = make_url(url).get_backend_name() == "sqlite"
    except (ArgumentError, ValueError):
        sqlite = False
    if not sqlite:
        if database_refusal(exc) is None:
            return SSL_HINT if "ssl" in driver_message(exc).lower() else UNREACHABLE_HINT
        connecting = isinstance(exc, DBAPIError) and exc.statement is None  # no CONNECT
        return MIGRATE_RIGHTS_HINT if migrating and not connecting else WRITE_RIGHTS_HINT
    words = driver_message(exc).lower()
    if "readonly" in words and (option := _read_only_option(url)):
        return (
            f"APTIX_DATABASE_URL opens the SQLite file read-only ({option}): for a command "
            f"that writes, drop {option} from it (the file and its folder must be writable too)"
        )
    for said, hint in _SQLITE_HINTS:
        if said in words:
            return hint
    return (
        "check that APTIX_DATABASE_URL (or APTIX_DATA_DIR) names a SQLite file this user can "
        "read and write, in a folder it can write"
    )


def _read_only_option(url: str) -> str | None:
    """The option of a SQLite URL that opens its file read-only (``mode=ro``), if it has one."""
    query = make_url(url).query
    if query.get("mode") == "ro":
        return "mode=ro"
    immutable = query.get("immutable")
    return f"immutable={immutable}" if immutable in ("1", "true", "yes", "on") else None


#: PostgreSQL's SQLSTATEs, and SQLite's words, for a migration meeting tables that are not
#: as the revision recorded in ``alembic_version`` says: a table, column or other object
#: already there, or one missing.
_CLASHES = frozenset({"42P07", "42701", "42710", "42P01", "42703", "42704"})
_SQLITE_CLASHES = ("already exists", "duplicate column name", "no such table", "no such column")


def _clashes_with_the_tables(exc: BaseException) -> bool:
    if getattr(getattr(exc, "orig", None), "sqlstate", None) in _CLASHES:
        return True
    return isinstance(exc, OperationalError) and any(
        said in driver_message(exc) for said in _SQLITE_CLASHES
    )


async def _mismatch_hint(database: Database) -> str:
    """The hint for a migration that met tables its recorded revision does not describe."""
    from aptix.db.migrate import current_revision, head_revision

    try:
        revision = await current_revision(database.engine)
        recorded = repr(revision) if revision else "none"
    except Exception:  # the clash said enough; the revision is a detail
        recorded = "unreadable"
    return (
        f"the tables do not match the revision alembic_version records ({recorded}), so "
        f"migrating them to {head_revision()} failed and changed nothing: restore the whole "
        "dump, alembic_version included, into an empty database, or record there the "
        "revision the tables are at"
    )


def driver_message(exc: BaseException) -> str:
    """The driver's own words: without SQLAlchemy's wrapper class and "Background" link."""
    original = getattr(exc, "orig", None) or exc
    text = " ".join(str(original).split())
    return re.sub(r"^<class '[\w.]+'>: ", "", text) or type(original).__name__
