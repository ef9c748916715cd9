"""Alembic environment: runs on the connection handed in by ``aptix.db.migrate``."""

from __future__ import annotations

from alembic import context

import aptix.db.tables  # noqa: F401  (registers every table on the metadata)
from aptix.db.base import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("Run migrations through `aptix db upgrade`, which supplies the connection.")

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
