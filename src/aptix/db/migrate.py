"""Alembic migrations run from code: on first use and by ``aptix db upgrade``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib.resources import files

from alembic.config import Config
from alembic.runtime.environment import EnvironmentContext
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncEngine

from aptix.errors import ConfigurationError

__all__ = ["Upgrade", "current_revision", "head_revision", "upgrade_to_head"]

# Any constant works; it only has to be the same in every Aptix process sharing a database.
_PG_MIGRATION_LOCK = 0x41505449


@dataclass(frozen=True)
class Upgrade:
    """What migrating did: the revision found (None: never migrated) and the one left."""

    before: str | None
    after: str

    @property
    def migrated(self) -> bool:
        """Whether any migration ran."""
        return self.before != self.after


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(files("aptix.db") / "migrations"))
    return cfg


@cache
def _script() -> ScriptDirectory:
    """The shipped migrations, read once a process: every runtime opened checks its database."""
    return ScriptDirectory.from_config(_config())


def head_revision() -> str:
    """The newest revision shipped with this version of Aptix."""
    head = _script().get_current_head()
    assert head is not None
    return head


def _upgrade(connection: Connection) -> Upgrade:
    if connection.dialect.name == "postgresql":
        # Several server processes may start at once against one database.
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
    # Read under the lock: a process that waited on another's migration finds it done.
    current = MigrationContext.configure(connection).get_current_revision()
    done = Upgrade(current, head_revision())
    if not done.migrated:
        return done
    _refuse_unknown(current)
    cfg = _config()
    cfg.attributes["connection"] = connection
    script = _script()
    # What ``alembic.command.upgrade(cfg, "head")`` does, on the script read once instead of
    # a fresh read of every migration file (0.1 s a runtime on a new database).
    with EnvironmentContext(
        cfg,
        script,
        fn=lambda revision, _context: script._upgrade_revs("head", revision),
        destination_rev="head",
    ):
        script.run_env()
    return done


def _refuse_unknown(current: str | None) -> None:
    """Refuse a database at a revision this Aptix does not ship: a newer Aptix wrote it."""
    if current is None:
        return
    try:
        _script().get_revision(current)
    except CommandError:
        raise ConfigurationError(
            f"The database is at revision {current!r}, which this Aptix does not know: a newer "
            f"Aptix wrote it (this one goes up to {head_revision()}).",
            hint="upgrade Aptix to the version that wrote the database, or roll the database "
            "back where docs/deployment.md (Rolling back an upgrade) says it is safe",
        ) from None


async def upgrade_to_head(engine: AsyncEngine) -> Upgrade:
    """Apply every pending migration in one transaction; say from which revision."""
    async with engine.begin() as connection:
        return await connection.run_sync(_upgrade)


async def current_revision(engine: AsyncEngine) -> str | None:
    """The revision the database is at, or None when it was never migrated."""
    async with engine.connect() as connection:
        return await connection.run_sync(
            lambda sync: MigrationContext.configure(sync).get_current_revision()
        )
