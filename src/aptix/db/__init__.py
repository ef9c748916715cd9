"""Storage: one async SQLAlchemy engine (SQLite by default, PostgreSQL when configured)."""

from aptix.db.base import Base
from aptix.db.engine import Database, open_database

__all__ = ["Base", "Database", "open_database"]
