"""``aptix db``: database maintenance."""

from __future__ import annotations

import asyncio

import typer

from aptix.cli.output import fail, say
from aptix.cli.runtime import config_failed, settings_or_exit
from aptix.errors import ConfigurationError

app = typer.Typer(help="Database maintenance.", no_args_is_help=True)


@app.command("upgrade")
def upgrade() -> None:
    """Apply pending migrations to the configured database (also done on first use)."""
    from aptix.db.engine import open_database
    from aptix.db.migrate import Upgrade, current_revision, head_revision

    settings = settings_or_exit()

    async def work() -> tuple[Upgrade | None, str | None]:
        database = await open_database(settings.effective_database_url)
        try:
            return database.upgrade, await current_revision(database.engine)
        finally:
            await database.close()

    try:
        done, revision = asyncio.run(work())
    except ConfigurationError as exc:
        config_failed(exc)
    if done is None or revision != head_revision():
        fail(f"The database is at {revision}, expected {head_revision()}.")
    if not done.migrated:
        say(f"Database is at the newest revision ({revision}): nothing to migrate.")
        return
    found = done.before or "nothing (an empty database)"
    say(f"Database migrated from {found} to the newest revision ({revision}).")
