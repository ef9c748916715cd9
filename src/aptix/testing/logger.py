"""``RecordingLogger``: an ``AdminLogger`` that keeps every record for assertions."""

from __future__ import annotations

from dataclasses import dataclass, field

from aptix.logger import LogLevel

__all__ = ["LogRecord", "RecordingLogger"]


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One recorded call on the logger."""

    kind: str
    tag: str
    message: str
    pairs: dict[str, str]
    exception: BaseException | None = None
    level: LogLevel | None = None


@dataclass(slots=True)
class RecordingLogger:
    """Records ``add_error``/``add_exception``/``add_custom_event``/``trace`` calls."""

    records: list[LogRecord] = field(default_factory=list)

    def add_error(self, tag: str, message: str, *pairs: tuple[str, str]) -> None:
        """Record an error."""
        self.records.append(LogRecord("error", tag, message, dict(pairs)))

    def add_exception(self, tag: str, exc: BaseException, *pairs: tuple[str, str]) -> None:
        """Record an exception."""
        self.records.append(LogRecord("exception", tag, str(exc), dict(pairs), exception=exc))

    def add_custom_event(
        self, level: LogLevel, tag: str, message: str, *pairs: tuple[str, str]
    ) -> None:
        """Record a custom event."""
        self.records.append(LogRecord("event", tag, message, dict(pairs), level=level))

    def trace(self, message: str, *pairs: tuple[str, str]) -> None:
        """Record a trace message."""
        self.records.append(LogRecord("trace", "trace", message, dict(pairs)))

    def of_kind(self, kind: str) -> list[LogRecord]:
        """The records of one kind: error, exception, event or trace."""
        return [r for r in self.records if r.kind == kind]

    @property
    def errors(self) -> list[LogRecord]:
        """Recorded errors and exceptions."""
        return [r for r in self.records if r.kind in ("error", "exception")]
