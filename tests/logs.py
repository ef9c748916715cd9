"""The records of Aptix's loggers, which ``open_runtime`` keeps from reaching pytest's caplog."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator


class _Records(logging.Handler):
    """Every record of the logger it is added to, at ``level`` or above."""

    def __init__(self, level: int) -> None:
        super().__init__(level)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def records_of(
    name: str = "aptix", level: int = logging.DEBUG
) -> Iterator[list[logging.LogRecord]]:
    """The records logged to ``name`` (and its children) while the block runs."""
    handler, logger = _Records(level), logging.getLogger(name)
    logger.addHandler(handler)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)
