"""Imports every table module so that the shared metadata is complete (used by Alembic)."""

from aptix.reasoner import tables as turn_tables
from aptix.sessions import tables as session_tables
from aptix.workflows import tables as workflow_tables

__all__ = ["session_tables", "turn_tables", "workflow_tables"]
