"""Imports every table module so that the shared metadata is complete (used by Alembic)."""

from aptix.sessions import tables as session_tables
from aptix.workflows import tables as workflow_tables

__all__ = ["session_tables", "workflow_tables"]
