"""The ``AdminLogger`` protocol and its default implementation on :mod:`logging`.

Records carry a stable ``tag`` (for example ``[agent_calculator_ExecuteAsync__Exception]``)
and key/value ``pairs`` as structured fields, so that JSON-lines output can be searched by
session and conversation id (AGN-005 §7).
"""

from __future__ import annotations

import contextlib
import logging
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from aptix.urls import mask_credentials

__all__ = [
    "OUTSIDE_TEXT_LIMIT",
    "AdminLogger",
    "LogLevel",
    "StdlibAdminLogger",
    "already_logged",
    "bounded",
    "mark_logged",
]

Pair = tuple[str, str]

#: Most characters of a text from outside (an exception's message, a tool name a model wrote)
#: that a log record or a span carries: such text can be of any size.
OUTSIDE_TEXT_LIMIT = 500


def bounded(text: str, limit: int = OUTSIDE_TEXT_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, its last one ``…`` when it was cut."""
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


class LogLevel(StrEnum):
    """Severity of a custom event."""

    TRACE = "trace"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


_LEVELS = {
    LogLevel.TRACE: logging.DEBUG,
    LogLevel.INFO: logging.INFO,
    LogLevel.WARNING: logging.WARNING,
    LogLevel.ERROR: logging.ERROR,
}


@runtime_checkable
class AdminLogger(Protocol):
    """Structured logging for tools and services (the seeds' ``IAdminLogger``)."""

    def add_error(self, tag: str, message: str, *pairs: Pair) -> None:
        """Record an error that was handled."""

    def add_exception(self, tag: str, exc: BaseException, *pairs: Pair) -> None:
        """Record an unexpected exception with its traceback (logs only, never results)."""

    def add_custom_event(self, level: LogLevel, tag: str, message: str, *pairs: Pair) -> None:
        """Record a custom event at ``level``."""

    def trace(self, message: str, *pairs: Pair) -> None:
        """Record a low-level trace message."""


class StdlibAdminLogger:
    """``AdminLogger`` writing through a standard :class:`logging.Logger`."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._logger = logger or logging.getLogger("aptix")

    def add_error(self, tag: str, message: str, *pairs: Pair) -> None:
        """Record an error that was handled."""
        self._logger.error("%s %s", tag, message, extra=_extra(tag, pairs))

    def add_exception(self, tag: str, exc: BaseException, *pairs: Pair) -> None:
        """Record an unexpected exception with its traceback."""
        self._logger.error(
            "%s %s: %s",
            tag,
            type(exc).__name__,
            bounded(mask_credentials(str(exc))),
            exc_info=(type(exc), exc, exc.__traceback__),
            extra=_extra(tag, pairs),
        )

    def add_custom_event(self, level: LogLevel, tag: str, message: str, *pairs: Pair) -> None:
        """Record a custom event at ``level``."""
        self._logger.log(_LEVELS[level], "%s %s", tag, message, extra=_extra(tag, pairs))

    def trace(self, message: str, *pairs: Pair) -> None:
        """Record a low-level trace message."""
        if self._logger.isEnabledFor(logging.DEBUG):
            self._logger.debug("%s", message, extra=_extra("trace", pairs))


def mark_logged(exc: BaseException) -> None:
    """Note that ``exc`` was logged with its traceback, so an outer handler need not again."""
    with contextlib.suppress(AttributeError):  # an exception class with __slots__
        exc.aptix_logged = True  # type: ignore[attr-defined]


def already_logged(exc: BaseException) -> bool:
    """Whether :func:`mark_logged` was called for ``exc``."""
    return bool(getattr(exc, "aptix_logged", False))


def _extra(tag: str, pairs: tuple[Pair, ...]) -> dict[str, Any]:
    return {"aptix_tag": tag, "aptix_fields": dict(pairs)}
